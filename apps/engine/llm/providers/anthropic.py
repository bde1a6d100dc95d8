"""Anthropic Messages API.

Pure functions: `build_body`, `parse_response`, `accumulate`. Mapping from the neutral types:

- system: one string, or (when any block is a cache breakpoint) a list of text blocks with
  `cache_control: {"type": "ephemeral"}` after each breakpoint. `system` messages found among
  the messages are appended to it.
- When the request uses prompt caching, the last content block of the last message also gets a
  breakpoint, so each step of an agent loop reads the conversation the previous step wrote
  (at most 4 breakpoints in all, as the API allows).
- assistant tool calls → `tool_use` blocks; tool messages → `tool_result` blocks in a user
  message (`is_error` kept); consecutive messages of one role are merged into one message.
- usage: Anthropic's `input_tokens` excludes cached tokens; the neutral `Usage.input_tokens`
  includes them (input + cache_read + cache_creation).

Stream events handled: `message_start`, `content_block_start/delta/stop` (`text_delta`,
`input_json_delta`; thinking, signature and citations deltas are ignored), `message_delta`,
`message_stop`, `ping`, `error` (after HTTP 200: a typed error); unknown event types are ignored.
Only blocks that start as `tool_use` become tool calls: the `input_json_delta` fragments of
server-side tools (`server_tool_use`: web search, code execution, tool search) and their result
blocks (`web_search_tool_result`, ...) ran on Anthropic's side and are skipped; a real call keeps
its block index (for order) and its id. `usage.server_tool_use` counts are kept in `raw_usage`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from apps.engine.llm.errors import body_error
from apps.engine.llm.providers.base import HTTPProvider
from apps.engine.llm.sse import ServerSentEvent, StreamSnapshot, build_tool_call
from apps.engine.llm.types import ChatRequest, ChatResponse, Message, TextBlock, Usage

API_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"
MAX_BREAKPOINTS = 4
EPHEMERAL = {"type": "ephemeral"}

STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "pause",
}


def _system_blocks(request: ChatRequest) -> list[TextBlock]:
    blocks = [block for block in request.system if block.text]
    blocks += [TextBlock(m.content) for m in request.messages if m.role == "system" and m.content]
    return blocks


def _content_blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": message.content or "(no output)",
        }
        if message.is_error:
            block["is_error"] = True
        return [block]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    if message.role == "assistant":
        blocks += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        ]
    return blocks or [{"type": "text", "text": "(empty)"}]


def build_messages(request: ChatRequest) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _content_blocks(message)
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": role, "content": blocks})
    return merged


def build_body(
    request: ChatRequest, *, model: str, max_tokens: int, temperature: float | None, stream: bool
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens or max_tokens}
    system = _system_blocks(request)
    caching = any(block.cache for block in system)
    messages = build_messages(request)
    if caching:
        budget = MAX_BREAKPOINTS - (1 if messages else 0)
        keep = [i for i, block in enumerate(system) if block.cache][-budget:] if budget else []
        body["system"] = [
            {
                "type": "text",
                "text": block.text,
                **({"cache_control": EPHEMERAL} if i in keep else {}),
            }
            for i, block in enumerate(system)
        ]
        if messages:
            messages[-1]["content"][-1] = {
                **messages[-1]["content"][-1],
                "cache_control": EPHEMERAL,
            }
    elif system:
        body["system"] = "\n\n".join(block.text for block in system)
    body["messages"] = messages
    temperature = request.temperature if request.temperature is not None else temperature
    if temperature is not None:
        body["temperature"] = temperature
    if request.tools:
        body["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
            for tool in request.tools
        ]
    if stream:
        body["stream"] = True
    return body


def usage_from(raw: dict[str, Any]) -> Usage:
    uncached = int(raw.get("input_tokens") or 0)
    read = int(raw.get("cache_read_input_tokens") or 0)
    write = int(raw.get("cache_creation_input_tokens") or 0)
    return Usage(
        input_tokens=uncached + read + write,
        output_tokens=int(raw.get("output_tokens") or 0),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def normalize_stop_reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    return STOP_REASONS.get(reason, reason)


def parse_response(data: dict[str, Any]) -> ChatResponse:
    text_parts: list[str] = []
    calls = []
    for index, block in enumerate(data.get("content") or []):
        kind = block.get("type")
        if kind == "text":
            text_parts.append(block.get("text") or "")
        elif kind == "tool_use":  # server_tool_use blocks ran on Anthropic's side: not ours
            raw = json.dumps(block.get("input") or {}, ensure_ascii=False)
            name = block.get("name") or ""
            calls.append(build_tool_call(block.get("id") or "", name, raw, position=index))
    return ChatResponse(
        content="".join(text_parts),
        tool_calls=calls,
        usage=usage_from(data.get("usage") or {}),
        finish_reason=normalize_stop_reason(data.get("stop_reason")),
        model=data.get("model") or "",
    )


def accumulate(event: ServerSentEvent, snapshot: StreamSnapshot) -> str:
    """Fold one Messages stream event into `snapshot`; return the text it adds."""
    data = json.loads(event.data) if event.data.strip() else {}
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    kind = data.get("type") or event.event
    if kind == "content_block_delta":
        delta = data["delta"]
        delta_kind = delta.get("type")
        if delta_kind == "text_delta":
            return snapshot.add_text(delta.get("text") or "")
        if delta_kind == "input_json_delta":
            index = int(data["index"])
            if snapshot.block_types.get(index) == "tool_use":  # not server_tool_use & co.
                snapshot.tool(index).argument_parts.append(delta.get("partial_json") or "")
        return ""  # citations_delta, thinking_delta, signature_delta, unknown deltas
    if kind == "content_block_start":
        block = data["content_block"]
        snapshot.block_types[int(data["index"])] = str(block.get("type"))
        if block.get("type") == "tool_use":
            draft = snapshot.tool(int(data["index"]))
            draft.id = block.get("id") or draft.id
            draft.name = block.get("name") or draft.name
            if block.get("input"):  # some proxies send the whole input here, no deltas
                draft.argument_parts.append(json.dumps(block["input"], ensure_ascii=False))
        elif block.get("type") == "text" and block.get("text"):
            return snapshot.add_text(block["text"])
        return ""
    if kind == "message_start":
        message = data.get("message") or {}
        snapshot.model = message.get("model") or snapshot.model
        snapshot.response_id = message.get("id") or snapshot.response_id
        _merge_usage(snapshot, message.get("usage"))
    elif kind == "message_delta":
        reason = (data.get("delta") or {}).get("stop_reason")
        if reason:
            snapshot.finish_reason = normalize_stop_reason(reason)
        _merge_usage(snapshot, data.get("usage"))
    elif kind == "message_stop":
        snapshot.done = True
    elif kind == "error":
        raise body_error(data)  # classified by its type, like the same error sent with its status
    return ""  # ping, content_block_stop, and event types this code does not know


def _merge_usage(snapshot: StreamSnapshot, usage: dict[str, Any] | None) -> None:
    if not usage:
        return
    for key, value in usage.items():
        if isinstance(value, int):
            snapshot.raw_usage[key] = value
        elif isinstance(value, dict):  # server_tool_use: {"web_search_requests": 1, ...}
            counts = {k: v for k, v in value.items() if isinstance(v, int)}
            snapshot.raw_usage[key] = {**snapshot.raw_usage.get(key, {}), **counts}
    snapshot.usage = usage_from(snapshot.raw_usage)


class AnthropicProvider(HTTPProvider):
    kind = "anthropic"
    request_id_headers: ClassVar[tuple[str, ...]] = ("request-id", "x-request-id")
    require_done = True

    @property
    def endpoint(self) -> str:
        base = (self.model.base_url or DEFAULT_BASE_URL).rstrip("/")
        if base.endswith("/messages"):
            return base
        return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}

    def _headers(self, api_key: str | None) -> dict[str, str]:
        return {**super()._headers(api_key), "anthropic-version": API_VERSION}

    def build_body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        return build_body(
            request,
            model=self.model.model,
            max_tokens=self.model.max_tokens,
            temperature=self.model.temperature,
            stream=stream,
        )

    def parse_response(self, data: Any) -> ChatResponse:
        return parse_response(data)

    def accumulate(self, event: ServerSentEvent, snapshot: StreamSnapshot) -> str:
        return accumulate(event, snapshot)
