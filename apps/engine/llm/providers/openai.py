"""OpenAI Chat Completions, as served by OpenAI and every OpenAI-compatible endpoint (DeepSeek,
Qwen/Bailian, OpenRouter, vLLM, Ollama, llama.cpp).

Pure functions: `build_body` (neutral request → JSON), `parse_response` (JSON → ChatResponse),
`accumulate` (one SSE event → snapshot). Tolerated in streams: a usage-only chunk whose `choices`
is `[]` or `null`, tool-call fragments keyed by `index` (id and name only in the first fragment,
or repeated), a missing `index`, `finish_reason` spellings (`function_call`, `eos`), `[DONE]`
missing after a finish reason, and an `{"error": ...}` chunk after HTTP 200. Cached prompt tokens
come from `usage.prompt_tokens_details.cached_tokens` (DeepSeek: `prompt_cache_hit_tokens`).

Structured output (`request.structured`, the planner): `response_format: {type: json_schema,
json_schema: {name, schema, strict: true}}`, or with `structured_output: tool` (servers without
json_schema) the schema as one more function and `tool_choice` forcing it (structured.py).

Reasoning models (DeepSeek, Qwen, OpenRouter) stream their reasoning as `reasoning_content` (or
`reasoning`) deltas: kept as `ChatResponse.reasoning` and given out as reasoning deltas, for
display and usage only. It is never sent back: the assistant messages built here carry content
and tool calls alone (DeepSeek refuses a request whose messages carry `reasoning_content`).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from apps.engine.llm.errors import body_error
from apps.engine.llm.providers.base import HTTPProvider
from apps.engine.llm.sse import ServerSentEvent, StreamSnapshot, build_tool_call
from apps.engine.llm.structured import StructuredMode, strict_schema, structured_mode
from apps.engine.llm.types import ChatRequest, ChatResponse, Message, StructuredOutput, Usage

# Models that refuse a temperature other than their default (OpenAI's o-series and gpt-5,
# DeepSeek's reasoner): an agent step's default temperature is not sent to them.
REASONING_MODEL = re.compile(r"(^|/)(o\d|gpt-5)|reasoner|(^|[-/])r1\b", re.IGNORECASE)

FINISH_REASONS = {
    "stop": "stop",
    "eos": "stop",
    "eos_token": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
}


def system_text(request: ChatRequest) -> str:
    return "\n\n".join(block.text for block in request.system if block.text)


def tool_arguments_text(call) -> str:
    if call.raw_arguments:
        return call.raw_arguments
    return json.dumps(call.arguments, sort_keys=True, ensure_ascii=False)


def message_json(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        # "" rather than null beside tool calls: some llama.cpp-family servers refuse null
        # with HTTP 500 (OpenAI takes either)
        out["content"] = message.content or ""
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": tool_arguments_text(call)},
            }
            for call in message.tool_calls
        ]
    return out


def build_body(
    request: ChatRequest,
    *,
    model: str,
    max_tokens: int,
    temperature: float | None,
    stream: bool,
    structured_mode: StructuredMode = "prompt",
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    system = system_text(request)
    if system:
        messages.append({"role": "system", "content": system})
    messages.extend(message_json(message) for message in request.messages)
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": request.max_tokens or max_tokens,
    }
    temperature = request.temperature if request.temperature is not None else temperature
    if temperature is None and not REASONING_MODEL.search(model):
        temperature = request.default_temperature  # reasoning models take only their default
    if temperature is not None:
        body["temperature"] = temperature
    if request.tools and request.tool_choice == "required":
        body["tool_choice"] = "required"
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                },
            }
            for tool in request.tools
        ]
    if request.structured is not None and structured_mode != "prompt":
        _add_structured(body, request.structured, structured_mode)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _add_structured(body: dict[str, Any], wanted: StructuredOutput, mode: StructuredMode) -> None:
    schema = strict_schema(wanted.schema)
    if mode == "json_schema":
        body["response_format"] = {
            "json_schema": {
                "description": wanted.description,
                "name": wanted.name,
                "schema": schema,
                "strict": True,
            },
            "type": "json_schema",
        }
        return
    function = {"description": wanted.description, "name": wanted.name, "parameters": schema}
    body["tools"] = [*body.get("tools", []), {"function": function, "type": "function"}]
    body["tool_choice"] = {"function": {"name": wanted.name}, "type": "function"}


def parse_usage(data: dict[str, Any] | None) -> Usage:
    if not data:
        return Usage()
    details = data.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or data.get("prompt_cache_hit_tokens") or 0
    return Usage(
        input_tokens=int(data.get("prompt_tokens") or 0),
        output_tokens=int(data.get("completion_tokens") or 0),
        cache_read_tokens=int(cached),
    )


def normalize_finish_reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    return FINISH_REASONS.get(reason, reason)


def parse_response(data: dict[str, Any]) -> ChatResponse:
    choice = (data.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    calls = [
        build_tool_call(
            call.get("id") or "",
            (call.get("function") or {}).get("name") or "",
            (call.get("function") or {}).get("arguments") or "",
            position=index,
        )
        for index, call in enumerate(message.get("tool_calls") or [])
    ]
    content = message.get("content")
    if isinstance(content, list):  # some servers answer with content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return ChatResponse(
        content=content or "",
        tool_calls=calls,
        usage=parse_usage(data.get("usage")),
        finish_reason=normalize_finish_reason(choice.get("finish_reason")),
        model=data.get("model") or "",
        reasoning=reasoning if isinstance(reasoning, str) else "",
    )


def accumulate(event: ServerSentEvent, snapshot: StreamSnapshot) -> str:
    """Fold one Chat Completions chunk into `snapshot`; return the text it adds."""
    data = event.data.strip()
    if data == "[DONE]":
        snapshot.done = True
        return ""
    if not data:
        return ""
    chunk = json.loads(data)
    if not isinstance(chunk, dict):
        raise TypeError(f"expected a JSON object, got {type(chunk).__name__}")
    if chunk.get("error"):  # classified by its status, code or type, like an HTTP error
        raise body_error(chunk)
    if chunk.get("model"):
        snapshot.model = chunk["model"]
    if chunk.get("id"):
        snapshot.response_id = chunk["id"]
    if chunk.get("usage"):
        snapshot.usage = parse_usage(chunk["usage"])
    text = ""
    for choice in chunk.get("choices") or []:
        if choice.get("index", 0) != 0:
            continue  # n > 1 is never requested
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str):
            snapshot.add_reasoning(reasoning)
        content = delta.get("content")
        if content:
            text += snapshot.add_text(content)
        for position, fragment in enumerate(delta.get("tool_calls") or []):
            _add_tool_fragment(snapshot, fragment, position)
        if choice.get("finish_reason"):
            snapshot.finish_reason = normalize_finish_reason(choice["finish_reason"])
    return text


def _add_tool_fragment(snapshot: StreamSnapshot, fragment: dict[str, Any], position: int) -> None:
    index = fragment.get("index")
    if index is None:  # servers that omit it: a new id starts a call, else continue the last
        known = [key for key in snapshot.tool_calls if isinstance(key, int)]
        ids = {draft.id for draft in snapshot.tool_calls.values()}
        if fragment.get("id") and fragment["id"] not in ids:
            index = max(known, default=-1) + 1
        else:
            index = max(known, default=position)
    draft = snapshot.tool(index)
    if fragment.get("id") and not draft.id:
        draft.id = fragment["id"]
    function = fragment.get("function") or {}
    name = function.get("name")
    if name and name != draft.name:
        draft.name = draft.name + name if draft.name else name
    if function.get("arguments"):
        draft.argument_parts.append(function["arguments"])


class OpenAIProvider(HTTPProvider):
    kind = "openai"
    request_id_headers: ClassVar[tuple[str, ...]] = ("x-request-id", "request-id")
    require_done = False

    @property
    def endpoint(self) -> str:
        base = (self.model.base_url or "").rstrip("/")
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"}

    def build_body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        return build_body(
            request,
            model=self.model.model,
            max_tokens=self.model.max_tokens,
            temperature=self.model.temperature,
            stream=stream,
            structured_mode=structured_mode(
                self.model, request.structured.mode if request.structured else None
            ),
        )

    def parse_response(self, data: Any) -> ChatResponse:
        return parse_response(data)

    def accumulate(self, event: ServerSentEvent, snapshot: StreamSnapshot) -> str:
        return accumulate(event, snapshot)
