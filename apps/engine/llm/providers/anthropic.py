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

Extended thinking (`models.<alias>.thinking_budget`): the request carries `thinking: {type:
enabled, budget_tokens}` (and no temperature: the API takes only its default then). The reply's
`thinking` blocks (text + `signature`, streamed as `thinking_delta` and `signature_delta`) and
`redacted_thinking` blocks (`data`) come back as `ChatResponse.thinking`; the engine keeps them on
the assistant message, and here they are sent back first in that message, unmodified, as the API
requires across a tool-use turn. Their text is also `ChatResponse.reasoning` (shown, as
`reasoning` deltas while it streams). A request whose tool-use turn began without thinking
blocks, or whose `max_tokens` leaves no room for the budget, goes without thinking (its thinking
blocks left out), as the API advises, instead of being refused.

Structured output (`request.structured`, the planner): the schema as one more tool and
`tool_choice: {type: tool, name}` forcing it (that request goes without thinking, which the API
does not allow with a forced tool); `structured_output: prompt` leaves it to the caller's words.

Stream events handled: `message_start`, `content_block_start/delta/stop` (`text_delta`,
`input_json_delta`, `thinking_delta`, `signature_delta`; citations deltas are ignored),
`message_delta`, `message_stop`, `ping`, `error` (after HTTP 200: a typed error); unknown event
types are ignored.
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
from apps.engine.llm.sse import ServerSentEvent, StreamSnapshot, ThinkingDraft, build_tool_call
from apps.engine.llm.structured import StructuredMode, strict_schema, structured_mode
from apps.engine.llm.types import (
    ChatRequest,
    ChatResponse,
    Message,
    TextBlock,
    ThinkingBlock,
    Usage,
)

API_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"
MAX_BREAKPOINTS = 4
EPHEMERAL = {"type": "ephemeral"}
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})

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
    blocks: list[dict[str, Any]] = [thinking_json(block) for block in message.thinking]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    if message.role == "assistant":
        blocks += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        ]
    return blocks or [{"type": "text", "text": "(empty)"}]


def thinking_json(block: ThinkingBlock) -> dict[str, Any]:
    """A thinking block as the API sent it (keys sorted: the same bytes every time)."""
    if block.kind == "redacted_thinking":
        return {"data": block.data, "type": "redacted_thinking"}
    return {"signature": block.signature, "thinking": block.thinking, "type": "thinking"}


def thinking_allowed(messages: list[dict[str, Any]]) -> bool:
    """Whether a request with these messages may enable thinking: inside a tool-use turn (the
    last message carries tool results) the assistant message before it must begin with its
    thinking blocks, which a reply made without thinking (thinking off then, a fallback model,
    a resumed run's rebuilt step) does not have. Such a request goes without thinking: the
    API's own advice, instead of its 400."""
    if len(messages) < 2 or not any(
        block.get("type") == "tool_result" for block in messages[-1]["content"]
    ):
        return True
    first = messages[-2]["content"][0].get("type")
    return first in {"thinking", "redacted_thinking"}


def _without_thinking(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kept = []
    for message in messages:
        blocks = [b for b in message["content"] if b["type"] not in THINKING_TYPES]
        kept.append({**message, "content": blocks or [{"type": "text", "text": "(empty)"}]})
    return kept


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
    request: ChatRequest,
    *,
    model: str,
    max_tokens: int,
    temperature: float | None,
    stream: bool,
    thinking_budget: int | None = None,
    structured_mode: StructuredMode = "tool",
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens or max_tokens}
    forced = request.structured if structured_mode == "tool" else None
    system = _system_blocks(request)
    caching = any(block.cache for block in system)
    messages = build_messages(request)
    thinking = (
        thinking_budget is not None
        and forced is None  # the API refuses thinking with a forced tool call
        and body["max_tokens"] > thinking_budget
        and thinking_allowed(messages)
    )
    if thinking:
        body["thinking"] = {"budget_tokens": thinking_budget, "type": "enabled"}
        temperature = None  # the API accepts only its default with thinking on
    elif thinking_budget is not None:
        messages = _without_thinking(messages)
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
    if not thinking:
        temperature = request.temperature if request.temperature is not None else temperature
        if temperature is None:
            temperature = request.default_temperature
    if temperature is not None:
        body["temperature"] = temperature
    if request.tools and request.tool_choice == "required" and not thinking:
        body["tool_choice"] = {"type": "any"}
    if request.tools:
        body["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
            for tool in request.tools
        ]
    if forced is not None:
        tool = {
            "description": forced.description,
            "input_schema": strict_schema(forced.schema),
            "name": forced.name,
        }
        body["tools"] = [*body.get("tools", []), tool]
        body["tool_choice"] = {"name": forced.name, "type": "tool"}
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
    thinking: list[ThinkingBlock] = []
    for index, block in enumerate(data.get("content") or []):
        kind = block.get("type")
        if kind == "thinking":
            thinking.append(
                ThinkingBlock(
                    "thinking",
                    thinking=block.get("thinking") or "",
                    signature=block.get("signature") or "",
                )
            )
        elif kind == "redacted_thinking":
            thinking.append(ThinkingBlock("redacted_thinking", data=block.get("data") or ""))
        elif kind == "text":
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
        thinking=tuple(thinking),
        reasoning="".join(block.thinking for block in thinking),
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
        elif delta_kind == "thinking_delta":
            draft = snapshot.thinking.setdefault(int(data["index"]), ThinkingDraft())
            draft.parts.append(delta.get("thinking") or "")
            snapshot.add_reasoning(delta.get("thinking") or "")
        elif delta_kind == "signature_delta":
            draft = snapshot.thinking.setdefault(int(data["index"]), ThinkingDraft())
            draft.signature += delta.get("signature") or ""
        return ""  # citations_delta, unknown deltas
    if kind == "content_block_start":
        block = data["content_block"]
        index = int(data["index"])
        snapshot.block_types[index] = str(block.get("type"))
        if block.get("type") in THINKING_TYPES:
            draft = snapshot.thinking[index] = ThinkingDraft(
                kind=block["type"],
                signature=block.get("signature") or "",
                data=block.get("data") or "",
            )
            if block.get("thinking"):
                draft.parts.append(block["thinking"])
                snapshot.add_reasoning(block["thinking"])
        elif block.get("type") == "tool_use":
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
            thinking_budget=self.model.thinking_budget,
            structured_mode=structured_mode(
                self.model, request.structured.mode if request.structured else None
            ),
        )

    def parse_response(self, data: Any) -> ChatResponse:
        return parse_response(data)

    def accumulate(self, event: ServerSentEvent, snapshot: StreamSnapshot) -> str:
        return accumulate(event, snapshot)
