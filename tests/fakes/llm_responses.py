"""How the fake LLM server (llm_server.py) writes its answers: the HTTP head, JSON bodies and
errors, status faults, the paced chunks of a stream in either protocol, a recorded stream
replayed, and the answer built from a script turn (its tool calls, a forced tool, its usage and
prompt-cache accounting). `Responses` is a part of FakeLLMServer: it uses the server's
settings (`ttft`, `tokens_per_second`, `reasoning_field`, `record_chunks`) and state."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from apps.engine.llm.cachesim import estimate_tokens
from apps.engine.llm.providers.script import ScriptTurn
from apps.engine.llm.types import ToolCall
from tests.fakes import llm_wire as wire
from tests.fakes.llm_faults import Fault
from tests.fakes.llm_wire_anthropic import (
    anthropic_cache_blocks,
    anthropic_events,
    anthropic_message,
)
from tests.fakes.llm_wire_openai import openai_completion, openai_events, openai_prompt_text

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    529: "Overloaded",
}


class Responses:
    def _answer(
        self, protocol: str, body: dict, turn: ScriptTurn, *, empty: bool, forced: str | None
    ) -> wire.Answer:
        prefix = "toolu" if protocol == "anthropic" else "call"
        calls = [
            ToolCall(call.id or f"{prefix}_{next(self._ids)}", call.name, dict(call.arguments))
            for call in turn.tool_calls
        ]
        text = turn.text
        if forced is not None and not calls and text:
            # A forced tool call, as the services answer one: the turn's text is its arguments.
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            arguments = parsed if isinstance(parsed, dict) else {}
            calls, text = [ToolCall(f"{prefix}_{next(self._ids)}", forced, arguments, text)], ""
        if empty:
            answer = wire.Answer()
        else:
            finish = turn.finish_reason or ("tool_calls" if calls else "stop")
            answer = wire.Answer(text, calls, finish, thinking=turn.thinking)
        with self._lock:
            if protocol == "anthropic":
                usage = self._anthropic_cache.account(anthropic_cache_blocks(body))
            else:
                usage = self._openai_cache.account(openai_prompt_text(body))
        answer.input_tokens = usage.input_tokens
        answer.cache_read = usage.cache_read_tokens
        answer.cache_write = usage.cache_write_tokens
        answer.output_tokens = estimate_tokens(answer.text + answer.thinking) + sum(
            estimate_tokens(call.name + wire.arguments_text(call)) for call in answer.tool_calls
        )
        if turn.usage is not None and not empty:
            answer.input_tokens = turn.usage.input_tokens
            answer.output_tokens = turn.usage.output_tokens
            answer.cache_read = turn.usage.cache_read_tokens
            answer.cache_write = turn.usage.cache_write_tokens
        return answer

    async def _send_head(self, writer, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def _common_headers(self) -> dict[str, str]:
        request_id = f"req_fake_{next(self._ids)}"
        return {"request-id": request_id, "x-request-id": request_id}

    async def _json(self, writer, status: int, payload: Any, extra: dict | None = None) -> bool:
        data = json.dumps(payload).encode()
        headers = {
            "content-type": "application/json",
            "content-length": str(len(data)),
            **self._common_headers(),
            **(extra or {}),
        }
        await self._send_head(writer, status, headers)
        writer.write(data)
        await writer.drain()
        return True

    async def _error(self, writer, protocol: str, exc: wire.BadRequest) -> bool:
        return await self._json(writer, exc.status, wire.error_body(protocol, exc.kind, str(exc)))

    async def _status_fault(self, writer, protocol, fault: Fault, headers) -> bool:
        message = fault.message
        kind = fault.error_type or wire.default_error_type(protocol, fault.status)
        if fault.kind == "auth_echo":
            sent = self._sent_key(protocol, headers) or "(none)"
            message = f"Incorrect API key provided: {sent}. You can find your API key in settings."
            kind = "authentication_error" if protocol == "anthropic" else "invalid_api_key"
        extra = dict(fault.headers)
        if fault.retry_after is not None:
            extra["retry-after"] = f"{fault.retry_after:g}"
        body = wire.error_body(protocol, kind, message)
        if protocol == "openai" and fault.error_type:
            body["error"]["code"] = fault.error_type
        return await self._json(writer, fault.status, body, extra)

    async def _pace(self, text: str, first: bool) -> None:
        delay = self.ttft if first else 0.0
        if self.tokens_per_second and not first:
            delay += max(1, estimate_tokens(text)) / self.tokens_per_second
        if delay > 0:
            await asyncio.sleep(delay)

    async def _complete(
        self, writer, protocol, body, answer: wire.Answer, fault: Fault | None
    ) -> bool:
        total = sum(max(1, estimate_tokens(c)) for c in wire.CHUNK.findall(answer.text))
        wait = self.ttft + (total / self.tokens_per_second if self.tokens_per_second else 0.0)
        if wait > 0:
            await asyncio.sleep(wait)
        payload = (
            openai_completion(
                body, answer, next(self._ids), self.reasoning_field, usage=self.usage_block
            )
            if protocol == "openai"
            else anthropic_message(body, answer, next(self._ids))
        )
        kind = fault.kind if fault else None
        if kind == "malformed_sse":
            data = json.dumps(payload).encode()[:40]
            await self._send_head(
                writer, 200, {"content-type": "application/json", "content-length": str(len(data))}
            )
            writer.write(data)
            await writer.drain()
            return True
        if kind == "error_event":
            error_type = fault.error_type or "server_error"
            return await self._json(
                writer, 200, wire.error_body(protocol, error_type, fault.message)
            )
        if kind == "disconnect":
            data = json.dumps(payload).encode()
            headers = {"content-type": "application/json", "content-length": str(len(data))}
            await self._send_head(writer, 200, headers)
            writer.write(data[: len(data) // 2])
            await writer.drain()
            writer.transport.abort()
            return False
        return await self._json(writer, 200, payload)

    async def _stream(
        self, writer, protocol, body, answer: wire.Answer, fault: Fault | None
    ) -> bool:
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "transfer-encoding": "chunked",
            **self._common_headers(),
        }
        await self._send_head(writer, 200, headers)
        await writer.drain()
        events = (
            openai_events(
                body,
                answer,
                next(self._ids),
                self.reasoning_field,
                usage=self.usage_block,
                repeated_call_ids=self.repeated_call_ids,
            )
            if protocol == "openai"
            else anthropic_events(body, answer, next(self._ids))
        )
        content_events = 0
        first = True
        key = _last_user_text(body) if self.record_chunks else ""
        for frame, visible in events:
            if fault is not None and visible is not None and content_events >= fault.after_chunks:
                if fault.kind == "disconnect":
                    writer.transport.abort()
                    return False
                if fault.kind == "malformed_sse":
                    bad = (
                        'data: {"choices": [{"index": 0, "delta": {"content": "brok\n\n'
                        if protocol == "openai"
                        else 'event: content_block_delta\ndata: {"type": "content_block_delta", "ind\n\n'
                    )
                    await self._chunk(writer, bad)
                    fault = None  # then carry on as if nothing happened
                elif fault.kind == "error_event":
                    error_type = fault.error_type or "overloaded_error"
                    payload = wire.error_body(protocol, error_type, fault.message)
                    if fault.error_json is not None:
                        payload = {"error": json.loads(fault.error_json)}
                        if protocol == "anthropic":
                            payload = {"type": "error", **payload}
                    if protocol == "openai":
                        await self._chunk(writer, f"data: {json.dumps(payload)}\n\n")
                    else:
                        await self._chunk(writer, f"event: error\ndata: {json.dumps(payload)}\n\n")
                    await self._end(writer)
                    return True
            if visible is not None:
                await self._pace(visible, first)
                first = False
                content_events += 1
            await self._chunk(writer, frame)
            if visible and self.record_chunks:
                with self._lock:
                    self._chunks.append((key, time.monotonic(), visible))
        await self._end(writer)
        return True

    async def _recorded_stream(self, writer, fault: Fault) -> bool:
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "transfer-encoding": "chunked",
            **self._common_headers(),
        }
        await self._send_head(writer, 200, headers)
        data = (fault.raw_body or "").encode()
        size = max(1, fault.chunk_size)
        for start in range(0, len(data), size):
            piece = data[start : start + size]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        await self._end(writer)
        return True

    @staticmethod
    async def _chunk(writer, text: str) -> None:
        data = text.encode("utf-8")
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()

    @staticmethod
    async def _end(writer) -> None:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _last_user_text(body: dict) -> str:
    """The text of the request's last user message (both protocols): which conversation a
    recorded chunk belongs to."""
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return ""
