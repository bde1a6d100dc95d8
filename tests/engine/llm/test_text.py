"""Storable model text (apps/engine/llm/text.py): the function, its stream form, and the gateway
over real HTTP to the fake LLM server, where a misbehaving model's text enters."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.engine.llm import Gateway, ToolCall
from apps.engine.llm.text import (
    REPLACEMENT,
    StorableStream,
    storable,
    storable_call,
    storable_value,
)
from tests.engine.llm.conftest import TOOLS, ask, config_for
from tests.fakes.llm_server import Fault

EMOJI = "\U0001f600"
HIGH, LOW = "\ud83d", "\ude00"  # its two UTF-16 halves
# Any text a model may send: every code point, and often lone surrogates, control characters
# (NUL included) and surrogate pairs as a JSON decoder gives them (st.text would mix the two
# alphabets so that surrogates almost never come up).
SURROGATE_PAIR = st.characters(min_codepoint=0x10000).map(
    lambda c: c.encode("utf-16-le").decode("utf-16-le", "surrogatepass")
)
ANY_TEXT = st.lists(
    st.one_of(st.characters(), st.characters(categories=["Cs", "Cc"]), SURROGATE_PAIR),
    max_size=60,
).map("".join)


def assert_storable(text: str) -> None:
    text.encode("utf-8")  # what SQLite's driver and PostgreSQL's need: no lone surrogate
    assert "\x00" not in text  # what PostgreSQL's text and jsonb refuse


def test_lone_surrogates_and_nul_become_the_replacement_character():
    assert storable("a\ud800b") == f"a{REPLACEMENT}b"
    assert storable("\udc00\ud800") == REPLACEMENT * 2
    assert storable("nul\x00") == f"nul{REPLACEMENT}"
    assert storable("é\x00\ud800") == f"é{REPLACEMENT}{REPLACEMENT}"


def test_a_surrogate_pair_becomes_its_character():
    assert storable(f"a{HIGH}{LOW}b") == f"a{EMOJI}b"
    assert storable(f"{HIGH}{LOW}{HIGH}") == EMOJI + REPLACEMENT


def test_storable_text_is_returned_as_it_is():
    for text in ("plain", "\x1b[31mred\x1b[0m\x07\x7f\x85", "ünïcødé \u2028 \ufeff", EMOJI):
        assert storable(text) is text


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_any_text_becomes_storable_and_storable_text_stays(text):
    out = storable(text)
    assert_storable(out)
    assert storable(out) == out
    if "\x00" not in text and not any("\ud800" <= c <= "\udfff" for c in text):
        assert out is text


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT, st.lists(st.integers(0, 120), max_size=6))
def test_a_stream_of_pieces_gives_what_the_joined_text_gives(text, cuts):
    """However a model's text is cut into chunks, the chunks made storable one by one add up
    to the whole text made storable: an emoji cut between two chunks comes out whole."""
    bounds = sorted({min(cut, len(text)) for cut in cuts})
    pieces = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True)]
    stream = StorableStream()
    out = [stream.push(piece) for piece in pieces] + [stream.end()]
    for piece in out:
        assert_storable(piece)
    assert "".join(out) == storable("".join(pieces))


def test_an_emoji_cut_between_two_chunks_comes_out_whole_once_its_second_half_arrives():
    stream = StorableStream()
    assert stream.push(f"hi {HIGH}") == "hi "
    assert stream.push(f"{LOW}!") == f"{EMOJI}!"
    assert stream.push(HIGH) == ""
    assert stream.end() == REPLACEMENT  # no second half came


def test_values_and_tool_calls_are_made_storable_through_and_through():
    value = {"k\x00": ["a\ud800", {"n": 1, "ok": True, "s": f"{HIGH}{LOW}"}], "plain": "x"}
    assert storable_value(value) == {
        f"k{REPLACEMENT}": [f"a{REPLACEMENT}", {"n": 1, "ok": True, "s": EMOJI}],
        "plain": "x",
    }
    clean = {"path": "a.py", "n": [1, 2.5, None]}
    assert storable_value(clean) is clean
    raw = json.dumps({"command": "echo \ud800\x00"})  # as sent: ASCII with \u escapes
    call = ToolCall("id", "shell", json.loads(raw), raw)
    fixed = storable_call(call)
    assert fixed.arguments == {"command": f"echo {REPLACEMENT}{REPLACEMENT}"}
    assert_storable(fixed.raw_arguments)
    plain = ToolCall("id", "shell", {"command": "ls"}, '{"command": "ls"}')
    assert storable_call(plain) is plain


# ── the gateway, over HTTP ──────────────────────────────────────────────────────────────────────
PROVIDERS = ["openai", "anthropic"]


async def collect(gateway: Gateway, request):
    texts, response = [], None
    async for delta in gateway.stream(request):
        if delta.response is not None:
            response = delta.response
        else:
            texts.append(delta.text)
    return texts, response


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_emoji_split_across_stream_chunks_arrives_whole(llm_server, provider):
    llm_server.set_script(["placeholder"])
    llm_server.fail_next(Fault.shaped(["smile ", HIGH, f"{LOW} and", " half ", HIGH]))
    async with Gateway(config_for(llm_server, {"main": provider})) as gateway:
        texts, response = await collect(gateway, ask())
    assert response.content == f"smile {EMOJI} and half {REPLACEMENT}"
    assert "".join(texts) == response.content
    assert texts == ["smile ", f"{EMOJI} and", " half ", REPLACEMENT]  # the halves, together


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [True, False])
async def test_nul_lone_surrogates_and_reasoning_junk_leave_the_gateway_storable(
    llm_server, provider, stream
):
    odd = "\x00 \ud800 \x1b[31m\x07"
    llm_server.set_script(
        [
            {
                "text": f"calling {odd}",
                "tool_calls": [{"name": "read_file", "arguments": {"path": f"a{odd}", odd: 1}}],
            }
        ]
    )
    llm_server.fail_next(Fault.shaped(None, reasoning=["thinking ", odd, HIGH]))
    async with Gateway(config_for(llm_server, {"main": provider})) as gateway:
        request = ask(tools=TOOLS)
        if stream:
            texts, response = await collect(gateway, request)
            assert "".join(texts) == response.content
        else:
            response = await gateway.complete(request)
    fixed = f"{REPLACEMENT} {REPLACEMENT} \x1b[31m\x07"  # ANSI and BEL are stored as they are
    assert response.content == f"calling {fixed}"
    (call,) = response.tool_calls
    assert call.arguments == {"path": f"a{fixed}", fixed: 1}
    assert call.arguments_error is None
    assert_storable(call.raw_arguments)
