"""The OpenAI Chat Completions wire format of the fake LLM server: a request in (validated like
the service does), the prompt as the service caches it, and answers out (a completion body, or
its SSE chunks). Pure functions; what both formats share is in llm_wire.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from apps.engine.llm.types import ChatRequest, Message, TextBlock, ToolCall, ToolSpec
from tests.fakes.llm_checks import REASONING_SENT_BACK, BadRequest
from tests.fakes.llm_wire import Answer, arguments_text, split_arguments, text_of


def openai_request(body: dict[str, Any]) -> ChatRequest:
    if not body.get("model"):
        raise BadRequest("you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array")
    if body.get("stream_options") and not body.get("stream"):
        raise BadRequest("The 'stream_options' parameter is only allowed when 'stream' is enabled.")
    system: list[TextBlock] = []
    neutral: list[Message] = []
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if open_calls and role != "tool":
            raise BadRequest(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. (insufficient tool messages following "
                f"tool_calls message at messages[{index - 1}])"
            )
        if role in {"system", "developer"}:
            system.append(TextBlock(text_of(message.get("content"))))
        elif role == "user":
            neutral.append(Message("user", text_of(message.get("content"))))
        elif role == "assistant":
            if "reasoning_content" in message or "reasoning" in message:
                raise BadRequest(REASONING_SENT_BACK)
            calls = []
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except ValueError:
                    arguments = {}
                calls.append(ToolCall(call["id"], function.get("name", ""), arguments))
                open_calls.add(call["id"])
            neutral.append(Message("assistant", text_of(message.get("content")), tuple(calls)))
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                raise BadRequest(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    f"preceeding message with 'tool_calls' (messages[{index}].tool_call_id "
                    f"{call_id!r})."
                )
            open_calls.discard(call_id)
            neutral.append(Message("tool", text_of(message.get("content")), tool_call_id=call_id))
        else:
            raise BadRequest(f"messages[{index}].role: unknown role {role!r}")
    if open_calls:
        raise BadRequest(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'."
        )
    tools = tuple(
        ToolSpec(
            t["function"]["name"],
            t["function"].get("description", ""),
            t["function"].get("parameters", {}),
        )
        for t in body.get("tools") or []
    )
    return ChatRequest(messages=tuple(neutral), system=tuple(system), tools=tools)


def openai_prompt_text(body: dict[str, Any]) -> str:
    """The prompt as one string, in the order the service caches it: tools, then messages."""
    tools = [json.dumps(tool, sort_keys=True) for tool in body.get("tools") or []]
    messages = [json.dumps(message, sort_keys=True) for message in body.get("messages") or []]
    return "".join(tools + messages)


def openai_usage(answer: Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": answer.input_tokens,
        "completion_tokens": answer.output_tokens,
        "total_tokens": answer.input_tokens + answer.output_tokens,
        "prompt_tokens_details": {"cached_tokens": answer.cache_read},
    }


def openai_tool_calls(answer: Answer) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": arguments_text(call)},
        }
        for call in answer.tool_calls
    ]


def openai_completion(
    body,
    answer: Answer,
    number: int,
    reasoning_field: str = "reasoning_content",
    *,
    usage: bool = True,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.thinking:
        message[reasoning_field] = answer.thinking
    if answer.tool_calls:
        message["tool_calls"] = openai_tool_calls(answer)
    completion = {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": answer.finish}],
    }
    if usage:
        completion["usage"] = openai_usage(answer)
    return completion


def openai_events(
    body,
    answer: Answer,
    number: int,
    reasoning_field: str = "reasoning_content",
    *,
    usage: bool = True,
    repeated_call_ids: bool = False,
) -> Iterator[tuple[str, str | None]]:
    """(SSE frame, visible text or None for bookkeeping frames). Reasoning streams first, as
    `reasoning_field` deltas (DeepSeek: reasoning_content; OpenRouter: reasoning).
    `usage=False`: no usage chunk even when asked (some llama.cpp-family servers);
    `repeated_call_ids`: every tool-call fragment repeats the call's id and name."""
    base = {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body["model"],
    }

    def frame(choices, **extra) -> str:
        return f"data: {json.dumps({**base, 'choices': choices, **extra})}\n\n"

    def delta(payload, finish=None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": payload, "finish_reason": finish}]

    yield frame(delta({"role": "assistant", "content": ""})), None
    for piece in answer.thinking_pieces():
        yield frame(delta({"content": None, reasoning_field: piece})), piece
    for piece in answer.text_pieces():
        yield frame(delta({"content": piece})), piece
    for index, call in enumerate(answer.tool_calls):
        pieces = split_arguments(arguments_text(call))
        head = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield frame(delta({"tool_calls": [head]})), call.name
        for piece in pieces:
            fragment = {"index": index, "function": {"arguments": piece}}
            if repeated_call_ids:
                fragment = {**head, "function": {"name": call.name, "arguments": piece}}
            yield frame(delta({"tool_calls": [fragment]})), piece
    yield frame(delta({}, answer.finish)), None
    if usage and (body.get("stream_options") or {}).get("include_usage"):
        yield frame([], usage=openai_usage(answer)), None
    yield "data: [DONE]\n\n", None
