"""Tool calls a model wrote as text. Local models (Ollama with qwen2.5-coder or llama3.2,
llama.cpp, LM Studio) often put their call in `content` instead of `tool_calls`: bare
`{"name": ..., "arguments": {...}}`, the same in a code fence, or inside
`<tool_call>…</tool_call>`. When tools were offered and the whole reply is exactly one such call
to one of them — the name one of the offered tools, the arguments valid against its schema — it
is a tool call (`text_call`); anything else stays text.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from apps.engine.llm.errors import LLMStatusError
from apps.engine.llm.types import (
    SYNTHETIC_ID_PREFIX,
    ChatRequest,
    ChatResponse,
    Message,
    StructuredOutput,
    ToolCall,
    ToolSpec,
)

FINAL_ANSWER = "final_answer"
FINAL_ANSWER_SPEC = ToolSpec(
    FINAL_ANSWER,
    "Finish the task: your final answer to the user, once the work is done.",
    {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The final answer."}},
        "required": ["text"],
    },
)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*(.*?)\s*```", re.DOTALL)
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
MAX_CHARS = 100_000  # a longer reply is text: never parsed


def text_call(content: str, specs: Sequence[ToolSpec]) -> ToolCall | None:
    """The one tool call `content` consists of, or None (it stays text)."""
    body = content.strip()
    if not body or len(body) > MAX_CHARS or not specs:
        return None
    for pattern in (_TAGGED, _FENCE):
        if (found := pattern.fullmatch(body)) is not None:
            body = found.group(1).strip()
            break
    if not (body.startswith("{") and body.endswith("}")):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    name, arguments = _name_and_arguments(data)
    spec = next((spec for spec in specs if spec.name == name), None)
    if spec is None or not isinstance(arguments, dict):
        return None
    try:
        valid = Draft202012Validator(spec.input_schema).is_valid(arguments)
    except SchemaError:
        return None
    if not valid:
        return None
    call_id = f"{SYNTHETIC_ID_PREFIX}{secrets.token_hex(6)}_0"
    raw = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
    return ToolCall(call_id, name, arguments, raw_arguments=raw, synthetic_id=True)


CALL_OUTPUT = "tool_call"


def call_request(request: ChatRequest) -> ChatRequest:
    """`request` asked again for one JSON tool call by structured output (json_schema: a
    server that constrains output by grammar then writes a valid call even when it ignores
    `tools`): `{"name": <an offered tool>, "arguments": <its arguments>}`, read by text_call."""
    variants = [
        {
            "type": "object",
            "properties": {"name": {"const": spec.name}, "arguments": spec.input_schema},
            "required": ["name", "arguments"],
        }
        for spec in request.tools
    ]
    wanted = StructuredOutput(
        CALL_OUTPUT,
        "One tool call: the tool's name and its arguments.",
        {"anyOf": variants},
        mode="json_schema",
    )
    hint = Message(
        "user",
        'Reply with one tool call as JSON: {"name": "<tool>", "arguments": {...}}. Tools: '
        + ", ".join(spec.name for spec in request.tools),
    )
    return dataclasses.replace(
        request, messages=(*request.messages, hint), tools=(), tool_choice=None, structured=wanted
    )


async def read_calls(
    run: Any, request: ChatRequest, reply: ChatResponse, ask: Callable[..., Awaitable[Any]]
) -> bool:
    """A reply of an agent step, read for what tools it calls (react.py): a call written as
    text becomes the call; with tool_choice required a prose reply is asked for once more as
    a JSON call (`ask`: the engine's unshown model call); a `final_answer` call becomes the
    reply's text. True when the reply's streamed text was a call (the chat drops it)."""
    was_text = False
    if not reply.tool_calls and (call := text_call(reply.content, run.specs)) is not None:
        reply.tool_calls, reply.content, was_text = [call], "", True
    if not reply.tool_calls and run.tool_choice == "required":
        try:
            again = await ask(run, call_request(request))
        except LLMStatusError:  # no json_schema either: the prose stands
            again = None
        if again is not None and (call := text_call(again.content, run.specs)) is not None:
            reply.tool_calls, reply.content, was_text = [call], "", True
    if (text := final_answer_text(reply.tool_calls)) is not None:
        reply.tool_calls, reply.content = [], text
    return was_text


def final_answer_text(calls: Sequence[ToolCall]) -> str | None:
    """The text of a `final_answer` call among `calls` (tool_choice: required), else None."""
    for call in calls:
        if call.name == FINAL_ANSWER:
            text = call.arguments.get("text") if isinstance(call.arguments, dict) else None
            return text if isinstance(text, str) else call.raw_arguments or ""
    return None


_ACTION_WORDS = re.compile(
    r"\b(fix|change|edit|add|create|write|implement|run|read|update|remove|delete|rename|"
    r"refactor|install|test|find|search|open|look)\b",
    re.IGNORECASE,
)


def undone_work(goal: str, content: str, specs: Sequence[ToolSpec]) -> bool:
    """Whether a prose reply looks like the task's work is undone: the goal asks for an action
    on the workspace, or the reply names an offered tool or holds code it did not apply."""
    names = [spec.name for spec in specs if spec.name != FINAL_ANSWER]
    if not names:
        return False
    if "```" in content or any(name in content for name in names):
        return True
    return bool(_ACTION_WORDS.search(goal))


def nudge_text(specs: Sequence[ToolSpec]) -> str:
    """The one reminder sent back after a prose reply with the work undone."""
    names = ", ".join(sorted(spec.name for spec in specs if spec.name != FINAL_ANSWER))
    return (
        "You answered in prose, but the task's work is not done: no tool has run. Use the tools "
        f"to do it ({names}): reply with a tool call (the function-calling format, or JSON "
        '{"name": "<tool>", "arguments": {...}}). If the task truly needs no tool, give the '
        "same answer again."
    )


def _name_and_arguments(data: dict[str, Any]) -> tuple[Any, Any]:
    """`{"name", "arguments"}` (or `parameters`), also wrapped in `{"function": {...}}`; the
    object has nothing else (then it is a call, not a JSON answer that happens to have a name)."""
    if set(data) == {"function"} and isinstance(data["function"], dict):
        data = data["function"]
    keys = set(data) - {"type", "id"}
    for key in ("arguments", "parameters"):
        if keys == {"name", key}:
            arguments = data[key]
            if isinstance(arguments, str):  # the arguments as JSON text, as on the wire
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    return None, None
            return data["name"], arguments
    return None, None
