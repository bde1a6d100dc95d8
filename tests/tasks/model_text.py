"""The misbehaviours of tests/tasks/test_model_text*.py: what the fake LLM server sends for each
(kind, place), what the task's result must then be, and a check that event data is storable."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from apps.engine.llm.text import REPLACEMENT
from tests.fakes.llm_server import Fault

EMOJI = "\U0001f600"
HIGH, LOW = "\ud83d", "\ude00"  # the emoji's two UTF-16 halves
# What the model sends, and what is stored of it.
ODD = {
    "surrogate": ("cut \ud800 emoji", f"cut {REPLACEMENT} emoji"),
    "nul": ("nul \x00 byte", f"nul {REPLACEMENT} byte"),
    "control": ("\x1b[1;31mred\x1b[0m \x07\x08\x0b\x7f\x85\u2028", None),  # kept as sent
}
PLACES = ("content", "reasoning", "arguments")
CASES = [(kind, place) for kind in ODD for place in PLACES]
ANSWER = "The answer is 42."


def sent(kind: str) -> str:
    return ODD[kind][0]


def stored(kind: str) -> str:
    text, fixed = ODD[kind]
    return text if fixed is None else fixed


def case_script(kind: str, place: str) -> list[dict[str, Any]]:
    """A tool call (with the odd text in its arguments for place "arguments"), then the
    answer. The answer's text for place "content" comes from case_faults (exact pieces)."""
    path = f"textkit/slug{sent(kind)}.py" if place == "arguments" else "textkit/slug.py"
    return [
        {"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": path}}]},
        {"text": ANSWER, "after_tool": "read_file"},
    ]


def case_faults(kind: str, place: str) -> list[Fault]:
    """Per request: reasoning with the odd text in it (place "reasoning"); the answer streamed
    in pieces with the odd text and an emoji cut between two chunks (place "content")."""
    if place == "reasoning":
        thinking = ["Let me think ", sent(kind), " and ", HIGH]
        return [Fault.shaped(reasoning=thinking), Fault.shaped(reasoning=thinking)]
    if place == "content":
        return [Fault.shaped(), Fault.shaped([ANSWER, " ", sent(kind), " ", HIGH, LOW, "."])]
    return []


def expected_result(kind: str, place: str) -> str:
    if place == "content":
        return f"{ANSWER} {stored(kind)} {EMOJI}."
    return ANSWER


def unstorable_in(value: Any) -> list[str]:
    """The strings in `value` that a database would refuse (NUL, a lone surrogate)."""
    found = []
    text = json.dumps(value, ensure_ascii=False)
    if "\\u0000" in text:
        found.append("NUL")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        found.append(f"surrogate: {exc.object[exc.start : exc.end]!r}")
    return found


# A tool whose output holds a NUL and a byte that is not UTF-8 (printf's octal escapes).
PRINT_BAD = "printf 'a\\000b\\377c'"
PRINTED_BAD = f"a{REPLACEMENT}b{REPLACEMENT}c"
TOOL_OUTPUT_SCRIPT = [
    {"text": "", "tool_calls": [{"name": "shell", "arguments": {"command": PRINT_BAD}}]},
    {"text": "Printed.", "after_tool": "shell"},
]
# An endpoint's error text with a NUL and a lone surrogate (it reaches the error event, the
# task's error and its owner's original_error); and what is stored of it.
ERROR_BODY = f"bad request {sent('nul')} {sent('surrogate')}"
ERROR_STORED = f"bad request {stored('nul')} {stored('surrogate')}"


def error_faults() -> list[Fault]:
    return [Fault.http_error(400, ERROR_BODY) for _ in range(3)]


# An answer over limits.answer_chars (1000 in these tests) and over the history's cut.
LONG_ANSWER = "".join(f"line {n} of the long answer {EMOJI}\n" for n in range(2000))


# Any text a model may send: every code point, and often lone surrogates, control characters
# (NUL included) and surrogate pairs as a JSON decoder gives them (one st.text would mix the two
# alphabets so that surrogates almost never come up).
SURROGATE_PAIR = st.characters(min_codepoint=0x10000).map(
    lambda c: c.encode("utf-16-le").decode("utf-16-le", "surrogatepass")
)
ANY_TEXT = st.lists(
    st.one_of(st.characters(), st.characters(categories=["Cs", "Cc"]), SURROGATE_PAIR),
    max_size=60,
).map("".join)
