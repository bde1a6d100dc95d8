"""The two wire formats of the fake LLM server: requests in (validated like the services do),
answers out (JSON bodies and SSE frames). Pure functions; the server is in llm_server.py."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from apps.engine.llm.cachesim import CacheBlock
from apps.engine.llm.types import (
    ChatRequest,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolSpec,
)
from tests.fakes.llm_checks import (
    REASONING_SENT_BACK,
    THINKING_MISSING,
    BadRequest,
    redacted_ok,
    thinking_enabled,
    thinking_signature,
)

CHUNK = re.compile(r"\S+\s*|\s+")  # how text is cut into streamed pieces (words)


@dataclass
class Answer:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish: str = "stop"  # stop | length | tool_calls
    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    thinking: str = ""  # Anthropic: a signed thinking block (when asked for); OpenAI: reasoning
    # How `text` is streamed: these exact pieces (one JSON string each, so a surrogate pair cut
    # between two arrives as two lone halves), None: cut in words (CHUNK).
    pieces: list[str] | None = None
    # How `thinking` is streamed, likewise (Fault.shaped): None: cut in words.
    thinking_cut: list[str] | None = None

    def text_pieces(self) -> list[str]:
        return list(self.pieces) if self.pieces is not None else CHUNK.findall(self.text)

    def thinking_pieces(self) -> list[str]:
        if self.thinking_cut is not None:
            return list(self.thinking_cut)
        return CHUNK.findall(self.thinking)


# ── wire → neutral ──────────────────────────────────────────────────────────────────────────────
def text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise BadRequest(f"content must be a string or a list of parts, got {type(content).__name__}")


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


def anthropic_request(body: dict[str, Any], headers: dict[str, str]) -> ChatRequest:
    if not headers.get("anthropic-version"):
        raise BadRequest("anthropic-version: header is required")
    if not body.get("model"):
        raise BadRequest("model: Field required")
    if not isinstance(body.get("max_tokens"), int):
        raise BadRequest("max_tokens: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: at least one message is required")
    breakpoints = 0
    system = body.get("system")
    blocks: list[TextBlock] = []
    if isinstance(system, str):
        blocks.append(TextBlock(system))
    elif isinstance(system, list):
        for index, block in enumerate(system):
            if block.get("type") != "text" or not block.get("text"):
                raise BadRequest(f"system.{index}: text content blocks must be non-empty")
            blocks.append(TextBlock(block["text"], cache="cache_control" in block))
    thinking_on = thinking_enabled(body)
    breakpoints += sum(1 for b in blocks if b.cache)
    breakpoints += sum(1 for t in body.get("tools") or [] if "cache_control" in t)
    neutral: list[Message] = []
    previous_role = None
    pending_tool_uses: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in {"user", "assistant"}:
            raise BadRequest(f"messages.{index}.role: Input should be 'user' or 'assistant'")
        if index == 0 and role != "user":
            raise BadRequest('messages: first message must use the "user" role')
        if role == previous_role:
            raise BadRequest('messages: roles must alternate between "user" and "assistant"')
        previous_role = role
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(parts, list) or not parts:
            raise BadRequest(f"messages.{index}: content must be non-empty")
        answered: set[str] = set()
        texts: list[str] = []
        calls: list[ToolCall] = []
        thoughts: list[ThinkingBlock] = []
        for position, part in enumerate(parts):
            breakpoints += "cache_control" in part
            kind = part.get("type")
            if kind == "thinking" and role == "assistant":
                if part.get("signature") != thinking_signature(str(part.get("thinking"))):
                    raise BadRequest(
                        f"messages.{index}.content.{position}: Invalid `signature` in "
                        "`thinking` block"
                    )
                thoughts.append(ThinkingBlock("thinking", part["thinking"], part["signature"]))
            elif kind == "redacted_thinking" and role == "assistant":
                if not redacted_ok(part.get("data")):
                    raise BadRequest(
                        f"messages.{index}.content.{position}: Invalid `data` in "
                        "`redacted_thinking` block"
                    )
                thoughts.append(ThinkingBlock("redacted_thinking", data=part["data"]))
            elif kind == "text":
                if not part.get("text"):
                    raise BadRequest(
                        f"messages.{index}.content.{position}: text content blocks must be non-empty"
                    )
                texts.append(part["text"])
            elif kind == "tool_use" and role == "assistant":
                if not isinstance(part.get("input"), dict):
                    raise BadRequest(
                        f"messages.{index}.content.{position}.input: must be an object"
                    )
                calls.append(ToolCall(part["id"], part["name"], part["input"]))
            elif kind == "tool_result" and role == "user":
                use_id = part.get("tool_use_id")
                if use_id not in pending_tool_uses:
                    raise BadRequest(
                        f"messages.{index}.content.{position}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {use_id}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
                answered.add(use_id)
                neutral.append(
                    Message(
                        "tool",
                        text_of(part.get("content")),
                        tool_call_id=use_id,
                        is_error=bool(part.get("is_error")),
                    )
                )
            else:
                raise BadRequest(f"messages.{index}.content.{position}: unexpected block {kind!r}")
        if role == "user":
            if pending_tool_uses - answered:
                raise BadRequest(
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(sorted(pending_tool_uses - answered))}"
                )
            pending_tool_uses = set()
            if texts:
                neutral.append(Message("user", "\n".join(texts)))
        else:
            pending_tool_uses = {call.id for call in calls}
            neutral.append(
                Message("assistant", "\n".join(texts), tuple(calls), thinking=tuple(thoughts))
            )
    if thinking_on and len(messages) >= 2 and pending_tool_uses == set():
        last_parts = messages[-1].get("content")
        in_tool_turn = isinstance(last_parts, list) and any(
            isinstance(p, dict) and p.get("type") == "tool_result" for p in last_parts
        )
        first = messages[-2]["content"]
        first = first[0] if isinstance(first, list) else {"type": "text"}
        if in_tool_turn and first.get("type") not in {"thinking", "redacted_thinking"}:
            raise BadRequest(
                THINKING_MISSING.format(index=len(messages) - 2, found=first.get("type"))
            )
    if breakpoints > 4:
        raise BadRequest(
            f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        )
    tools = tuple(
        ToolSpec(t["name"], t.get("description", ""), t.get("input_schema", {}))
        for t in body.get("tools") or []
    )
    return ChatRequest(messages=tuple(neutral), system=tuple(blocks), tools=tools)


def anthropic_cache_blocks(body: dict[str, Any]) -> list[CacheBlock]:
    """Tools, then system, then message content blocks; a breakpoint where cache_control is."""

    def block(value: Any) -> CacheBlock:
        if isinstance(value, dict):
            marked = "cache_control" in value
            clean = {k: v for k, v in value.items() if k != "cache_control"}
            return CacheBlock(json.dumps(clean, sort_keys=True), marked)
        return CacheBlock(json.dumps(value, sort_keys=True))

    blocks = [block(tool) for tool in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(CacheBlock(system))
    elif isinstance(system, list):
        blocks += [block(b) for b in system]
    for message in body.get("messages") or []:
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks.append(CacheBlock(f"<{message.get('role')}>"))
        blocks += [block(part) for part in parts or []]
    return blocks


def openai_prompt_text(body: dict[str, Any]) -> str:
    """The prompt as one string, in the order the service caches it: tools, then messages."""
    tools = [json.dumps(tool, sort_keys=True) for tool in body.get("tools") or []]
    messages = [json.dumps(message, sort_keys=True) for message in body.get("messages") or []]
    return "".join(tools + messages)


def default_error_type(protocol: str, status: int) -> str:
    if protocol == "anthropic":
        return {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
    return {400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(
        status, "server_error"
    )


def error_body(protocol: str, kind: str, message: str) -> dict[str, Any]:
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


# ── OpenAI wire format ─────────────────────────────────────────────────────────────────────────
def openai_usage(answer: Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": answer.input_tokens,
        "completion_tokens": answer.output_tokens,
        "total_tokens": answer.input_tokens + answer.output_tokens,
        "prompt_tokens_details": {"cached_tokens": answer.cache_read},
    }


def arguments_text(call: ToolCall) -> str:
    """The arguments as the model wrote them (a forced call's text may not even be JSON)."""
    return call.raw_arguments or json.dumps(call.arguments)


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
    body, answer: Answer, number: int, reasoning_field: str = "reasoning_content"
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.thinking:
        message[reasoning_field] = answer.thinking
    if answer.tool_calls:
        message["tool_calls"] = openai_tool_calls(answer)
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": answer.finish}],
        "usage": openai_usage(answer),
    }


def split_arguments(text: str, pieces: int = 3) -> list[str]:
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def openai_events(
    body, answer: Answer, number: int, reasoning_field: str = "reasoning_content"
) -> Iterator[tuple[str, str | None]]:
    """(SSE frame, visible text or None for bookkeeping frames). Reasoning streams first, as
    `reasoning_field` deltas (DeepSeek: reasoning_content; OpenRouter: reasoning)."""
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
            yield frame(delta({"tool_calls": [fragment]})), piece
    yield frame(delta({}, answer.finish)), None
    if (body.get("stream_options") or {}).get("include_usage"):
        yield frame([], usage=openai_usage(answer)), None
    yield "data: [DONE]\n\n", None


# ── Anthropic wire format ──────────────────────────────────────────────────────────────────────
ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def anthropic_usage(answer: Answer, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": answer.input_tokens - answer.cache_read - answer.cache_write,
        "cache_creation_input_tokens": answer.cache_write,
        "cache_read_input_tokens": answer.cache_read,
        "output_tokens": output_tokens,
    }


def anthropic_thinks(body: dict[str, Any], answer: Answer) -> bool:
    """A thinking block answers only a request that enabled thinking (as with the API)."""
    thinking = body.get("thinking")
    return (
        bool(answer.thinking) and isinstance(thinking, dict) and thinking.get("type") == "enabled"
    )


def anthropic_message(body, answer: Answer, number: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if anthropic_thinks(body, answer):
        content.append(
            {
                "type": "thinking",
                "thinking": answer.thinking,
                "signature": thinking_signature(answer.thinking),
            }
        )
    if answer.text:
        content.append({"type": "text", "text": answer.text})
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
        for c in answer.tool_calls
    ]
    return {
        "id": f"msg_fake_{number}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": ANTHROPIC_STOP.get(answer.finish, answer.finish),
        "stop_sequence": None,
        "usage": anthropic_usage(answer, answer.output_tokens),
    }


def anthropic_events(body, answer: Answer, number: int) -> Iterator[tuple[str, str | None]]:
    def frame(kind: str, payload: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"

    message = {**anthropic_message(body, answer, number), "content": [], "stop_reason": None}
    message["usage"] = anthropic_usage(answer, 1)
    yield frame("message_start", {"message": message}), None
    yield frame("ping", {}), None
    index = 0
    if anthropic_thinks(body, answer):
        start = {"type": "thinking", "thinking": "", "signature": ""}
        yield frame("content_block_start", {"index": 0, "content_block": start}), None
        for piece in answer.thinking_pieces():
            delta = {"type": "thinking_delta", "thinking": piece}
            yield frame("content_block_delta", {"index": 0, "delta": delta}), piece
        signature = thinking_signature(answer.thinking)
        for piece in split_arguments(signature, 2):
            delta = {"type": "signature_delta", "signature": piece}
            yield frame("content_block_delta", {"index": 0, "delta": delta}), None
        yield frame("content_block_stop", {"index": 0}), None
        index = 1
    if answer.text:
        start = {"type": "text", "text": ""}
        yield frame("content_block_start", {"index": index, "content_block": start}), None
        for piece in answer.text_pieces():
            delta = {"type": "text_delta", "text": piece}
            yield frame("content_block_delta", {"index": index, "delta": delta}), piece
        yield frame("content_block_stop", {"index": index}), None
        index += 1
    for offset, call in enumerate(answer.tool_calls):
        position = index + offset
        start = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield frame("content_block_start", {"index": position, "content_block": start}), call.name
        for piece in split_arguments(arguments_text(call)):
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield frame("content_block_delta", {"index": position, "delta": delta}), piece
        yield frame("content_block_stop", {"index": position}), None
    stop = {"stop_reason": ANTHROPIC_STOP.get(answer.finish, answer.finish), "stop_sequence": None}
    usage = {"output_tokens": answer.output_tokens}
    yield frame("message_delta", {"delta": stop, "usage": usage}), None
    yield frame("message_stop", {}), None
