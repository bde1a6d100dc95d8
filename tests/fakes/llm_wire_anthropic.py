"""The Anthropic Messages wire format of the fake LLM server: a request in (validated like the
service does, thinking blocks and cache breakpoints included), its prompt-cache blocks, and
answers out (a message body, or its SSE events). Pure functions; what both formats share is in
llm_wire.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from apps.engine.llm.cachesim import CacheBlock
from apps.engine.llm.types import ChatRequest, Message, TextBlock, ThinkingBlock, ToolCall, ToolSpec
from tests.fakes.llm_checks import (
    THINKING_MISSING,
    BadRequest,
    redacted_ok,
    thinking_enabled,
    thinking_signature,
)
from tests.fakes.llm_wire import Answer, arguments_text, split_arguments, text_of


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
