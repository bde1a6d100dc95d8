"""A fake LLM HTTP server: OpenAI Chat Completions and Anthropic Messages, streamed or not.

A real HTTP/1.1 server on 127.0.0.1 (random port), run on its own event loop in a background
thread, for tests and benchmarks. Provider code talks to it over real sockets: nothing patched.

    with FakeLLMServer(script=["Hello!"]) as server:        # turns as for the scripted provider
        server.openai_base_url      # http://127.0.0.1:PORT/v1   (POST /v1/chat/completions)
        server.anthropic_base_url   # http://127.0.0.1:PORT      (POST /v1/messages)
        server.fail_next(Fault.rate_limit(retry_after=0.01), Fault.http_error(500))
        server.requests             # every request: path, headers, JSON body, model

What it does like the real services:
- Answers from a script in the scripted provider's format (providers/scripted.py): turn
  selection, `match` on the last user/tool message, tool calls, `fail: ...` turns. Without a
  script every call gets "Hello from the fake LLM server.". A script that runs out answers 400
  with the scripted provider's explanation. A request answered with a fault does not use up
  its turn, so the retry gets the same answer.
- Streams the way the services do: OpenAI chunks (role chunk, text, tool-call argument
  fragments by `index`, finish chunk, a usage-only chunk with `choices: []` when
  `stream_options.include_usage`, `[DONE]`); Anthropic events (message_start, ping,
  content_block_start/delta/stop with `input_json_delta`, message_delta, message_stop).
- `ttft` (seconds before the first token) and `tokens_per_second` (None: as fast as possible).
- `record_chunks=True`: every streamed text chunk is kept with the `time.monotonic()` at which
  it was written and the text of the request's last user message; `GET /_chunks` returns them
  (bench/streaming.py measures chunk-to-frame latency from them; the clock is system-wide).
- Faults on demand, consumed one per request in order (optionally only by requests for one
  model): error status (500, 429 with retry-after, ...), hang until the client times out,
  malformed SSE line, `error` event after HTTP 200 (or any given error object, e.g. Groq's
  `tool_use_failed`), a recorded SSE body replayed byte for byte, disconnect mid-stream, empty
  answer, 401
  that echoes the API key, context-window 400, one JSON body for a streaming request; and a
  misbehaving model's text (`Fault.shaped`): exact stream pieces (an emoji cut between two,
  a lone surrogate, NUL, control characters) and reasoning sent before the text.
- Reasoning: a turn's `thinking` streams before its text — Anthropic, when the request enables
  `thinking`, as a `thinking` block (`thinking_delta`s, then a `signature_delta` whose value
  signs the text); OpenAI as `reasoning_content` deltas (`reasoning_field`). Like the services,
  it refuses with 400 a request whose thinking block was changed (bad signature), a tool-use
  turn (thinking enabled) whose assistant message does not begin with its thinking block, and an
  OpenAI assistant message that carries `reasoning_content` / `reasoning` back (DeepSeek's 400).
- Structured output: OpenAI `response_format` checked as the service does (json_schema needs a
  name and a schema; `strict` needs closed objects with every property required), or refused
  as a server without json_schema refuses it (`json_schema_supported=False`, DeepSeek's 400);
  `tool_choice` must name one of the request's tools (Anthropic: never with thinking on). A
  forced tool is honoured: a text turn comes back as that tool's call, its text the arguments.
  Every body is kept in `requests`, `response_format` and `tool_choice` included.
- Prompt-cache accounting (apps/engine/llm/cachesim.py): Anthropic breakpoints with a minimum
  cacheable length, reads vs writes; OpenAI automatic prefix caching from 1024 tokens in
  128-token steps, reported as `prompt_tokens_details.cached_tokens`.
- Rejects malformed requests with 400 like the services: missing model / max_tokens /
  anthropic-version, tool results without their tool call (and the reverse), empty text blocks,
  more than 4 cache breakpoints, non-alternating Anthropic roles. With `api_key=...`, a
  request without that key gets 401.

Run it on its own: `python -m tests.fakes.llm_server --port 8765 [--script FILE] [--ttft S]
[--tps N]`; `running_in_subprocess(...)` does that for benchmarks (no faults there).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps.engine.llm.cachesim import BreakpointCache, PrefixCache, estimate_tokens
from apps.engine.llm.errors import ScriptExhaustedError
from apps.engine.llm.providers.script import ScriptTurn
from apps.engine.llm.providers.scripted import ScriptedProvider
from apps.engine.llm.types import ToolCall
from tests.fakes import llm_checks as checks
from tests.fakes import llm_wire as wire

DEFAULT_SCRIPT = [{"text": "Hello from the fake LLM server.", "repeat": True}]
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    529: "Overloaded",
}


# ── faults ──────────────────────────────────────────────────────────────────────────────────────
@dataclass(frozen=True)
class Fault:
    """One misbehaviour, applied to one request. `model`: only requests for that model."""

    kind: str
    status: int = 500
    retry_after: float | None = None
    message: str = "fake failure"
    error_type: str | None = None
    after_chunks: int = 1
    seconds: float = 3600.0
    model: str | None = None
    headers: tuple[tuple[str, str], ...] = ()  # extra response headers (status faults)
    error_json: str | None = None  # stream_error: the error object sent, as JSON text
    raw_body: str | None = None  # recorded_stream: the SSE body sent as it is
    chunk_size: int = 64  # recorded_stream: bytes per write
    pieces: tuple[str, ...] | None = None  # shaped: the text, as streamed
    reasoning: tuple[str, ...] = ()  # shaped: reasoning pieces sent before the text

    @classmethod
    def http_error(cls, status: int = 500, message: str = "fake server error", **kw) -> Fault:
        """An error status with a JSON error body in the protocol's shape."""
        return cls("status", status=status, message=message, **kw)

    @classmethod
    def rate_limit(cls, retry_after: float | None = 0.01, **kw) -> Fault:
        return cls(
            "status", status=429, retry_after=retry_after, message="rate limit exceeded", **kw
        )

    @classmethod
    def hang(cls, seconds: float = 3600.0, **kw) -> Fault:
        """Accept the request and send nothing: the client's read timeout must fire."""
        return cls("hang", seconds=seconds, **kw)

    @classmethod
    def malformed_sse(cls, after_chunks: int = 1, **kw) -> Fault:
        """A `data:` line that is not JSON (stream); a body that is not JSON (non-stream)."""
        return cls("malformed_sse", after_chunks=after_chunks, **kw)

    @classmethod
    def error_event(
        cls, after_chunks: int = 1, error_type: str = "overloaded_error", **kw
    ) -> Fault:
        """HTTP 200, some text, then an error event (OpenAI: an `{"error": ...}` chunk)."""
        return cls("error_event", after_chunks=after_chunks, error_type=error_type, **kw)

    @classmethod
    def stream_error(cls, error: dict[str, Any], after_chunks: int = 1, **kw) -> Fault:
        """HTTP 200, some text, then this exact error object in the stream (OpenAI: a
        `data: {"error": ...}` chunk; Anthropic: an `error` event), e.g. Groq's
        `tool_use_failed`."""
        return cls("error_event", after_chunks=after_chunks, error_json=json.dumps(error), **kw)

    @classmethod
    def recorded_stream(cls, body: bytes, chunk_size: int = 64, **kw) -> Fault:
        """Answer a streaming request with these exact SSE bytes (a recorded stream, e.g. one
        with server-side tool blocks), sent in `chunk_size`-byte pieces."""
        return cls("recorded_stream", raw_body=body.decode(), chunk_size=chunk_size, **kw)

    @classmethod
    def shaped(
        cls, pieces: Sequence[str] | None = None, reasoning: Sequence[str] = (), **kw
    ) -> Fault:
        """The script's answer, with its text replaced by `pieces` streamed one per chunk
        (joined when not streamed; None: the turn's own text) and `reasoning` sent first
        (OpenAI `reasoning_content` deltas, as DeepSeek; an Anthropic `thinking` block). Each
        piece is its own JSON string, written as JSON encoders write it (ASCII escapes): a
        surrogate pair split between two pieces arrives as two lone halves, `\\ud83d` then
        `\\ude00`; a NUL as `\\u0000`."""
        pieces = tuple(pieces) if pieces is not None else None
        return cls("shaped", pieces=pieces, reasoning=tuple(reasoning), **kw)

    @classmethod
    def disconnect(cls, after_chunks: int = 2, **kw) -> Fault:
        """Close the connection in the middle of the body."""
        return cls("disconnect", after_chunks=after_chunks, **kw)

    @classmethod
    def ignore_stream(cls, **kw) -> Fault:
        """Answer a streaming request with one JSON body, as some compatible servers do."""
        return cls("ignore_stream", **kw)

    @classmethod
    def empty(cls, **kw) -> Fault:
        """A well-formed answer with no text and no tool calls."""
        return cls("empty", **kw)

    @classmethod
    def auth_echo(cls, **kw) -> Fault:
        """401 whose body repeats the key the client sent (some services echo part of it)."""
        return cls("auth_echo", status=401, **kw)

    @classmethod
    def context_window(cls, **kw) -> Fault:
        return cls(
            "status",
            status=400,
            message="This model's maximum context length is 8192 tokens; your prompt is too long.",
            error_type="context_length_exceeded",
            **kw,
        )


_SCRIPT_FAILS = {
    "server_error": Fault.http_error(500),
    "rate_limit": Fault.rate_limit(retry_after=0.0),
    "auth": Fault("status", status=401, message="invalid api key"),
    "context_window": Fault.context_window(),
    "timeout": Fault.hang(),
    "connection": Fault.disconnect(after_chunks=0),
    "empty": Fault.empty(),
}


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    protocol: str | None = None
    model: str | None = None

    @property
    def stream(self) -> bool:
        return bool(isinstance(self.body, dict) and self.body.get("stream"))


# ── the server ──────────────────────────────────────────────────────────────────────────────────
class FakeLLMServer:
    def __init__(
        self,
        script: Any = None,
        *,
        ttft: float = 0.0,
        tokens_per_second: float | None = None,
        api_key: str | None = None,
        anthropic_min_cacheable_tokens: int = 1024,
        openai_min_cached_tokens: int = 1024,
        openai_cache_step: int = 128,
        host: str = "127.0.0.1",
        port: int = 0,
        record_chunks: bool = False,
        ssl_context: ssl.SSLContext | None = None,
        reasoning_field: str = "reasoning_content",
        json_schema_supported: bool = True,
    ):
        """`ssl_context` (a server-side context): serve HTTPS instead of HTTP.
        `reasoning_field`: the OpenAI delta field a turn's `thinking` streams in
        (`reasoning_content` as DeepSeek and Qwen, `reasoning` as OpenRouter)."""
        self.reasoning_field = reasoning_field
        self.json_schema_supported = json_schema_supported
        self.record_chunks = record_chunks
        self.ssl_context = ssl_context
        self._chunks: list[tuple[str, float, str]] = []
        self.ttft = ttft
        self.tokens_per_second = tokens_per_second
        self.api_key = api_key
        self.host = host
        self._port = port
        self._lock = threading.Lock()
        self._faults: deque[Fault] = deque()
        self._requests: list[RecordedRequest] = []
        self._script_source = script if script is not None else DEFAULT_SCRIPT
        self._player = ScriptedProvider(self._script_source, alias="fake-server")
        self._anthropic_cache = BreakpointCache(min_tokens=anthropic_min_cacheable_tokens)
        self._openai_cache = PrefixCache(
            min_tokens=openai_min_cached_tokens, step=openai_cache_step
        )
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()

    # ── control (any thread) ──────────────────────────────────────────────────────────────────
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake LLM server is not running; call start() first")
        return self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def base_url(self, provider: str) -> str:
        return self.openai_base_url if provider == "openai" else self.anthropic_base_url

    def model_entry(self, provider: str, model: str = "fake-model", **extra: Any) -> dict:
        """A `models.<alias>` mapping for agentkit.yaml that points at this server."""
        return {"provider": provider, "model": model, "base_url": self.base_url(provider), **extra}

    def fail_next(self, *faults: Fault) -> None:
        with self._lock:
            self._faults.extend(faults)

    def set_script(self, script: Any) -> None:
        with self._lock:
            self._script_source = script
            self._player = ScriptedProvider(script, alias="fake-server")

    def reset(self) -> None:
        """Forget requests, faults, cache contents and which turns were used."""
        with self._lock:
            self._faults.clear()
            self._requests.clear()
            self._player = ScriptedProvider(self._script_source, alias="fake-server")
            self._anthropic_cache.reset()
            self._openai_cache.reset()

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def pending_faults(self) -> int:
        with self._lock:
            return len(self._faults)

    def start(self) -> FakeLLMServer:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(
                        self._serve_connection, self.host, self._port, ssl=self.ssl_context
                    )
                )
            except BaseException as exc:  # surfaced to the caller of start()
                failure.append(exc)
                ready.set()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._shutdown())
                loop.close()

        self._thread = threading.Thread(target=run, name="fake-llm-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def close_connections(self, timeout: float = 5.0) -> None:
        """Close every client connection now (as a server whose keep-alive ran out does)."""
        if self._loop is None:
            return
        done = threading.Event()

        async def close_all() -> None:
            tasks = list(self._connections)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            done.set()

        asyncio.run_coroutine_threadsafe(close_all(), self._loop)
        done.wait(timeout)

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._thread = None
        self._loop = None
        self._server = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    # ── HTTP ──────────────────────────────────────────────────────────────────────────────────
    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        task = asyncio.current_task()
        self._connections.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                raw = await reader.readexactly(length) if length else b""
                keep_open = await self._handle(writer, method, path, headers, raw)
                if not keep_open or headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._connections.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(self, writer, method, path, headers, raw) -> bool:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
            bad_json = True
        else:
            bad_json = False
        path_only = path.split("?", 1)[0].rstrip("/")
        protocol = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}.get(path_only)
        model = body.get("model") if isinstance(body, dict) else None
        record = RecordedRequest(method, path, headers, body, protocol, model)
        with self._lock:
            self._requests.append(record)
            fault = self._take_fault(model)
        if method == "GET" and path_only == "/health":
            return await self._json(writer, 200, {"ok": True})
        if method == "GET" and path_only == "/_chunks":
            with self._lock:
                chunks = list(self._chunks)
            return await self._json(writer, 200, {"chunks": chunks})
        if protocol is None or method != "POST":
            return await self._json(writer, 404, {"error": {"message": f"no route {path}"}})
        if bad_json or not isinstance(body, dict):
            return await self._error(writer, protocol, wire.BadRequest("request body is not JSON"))
        if self.api_key is not None and self._sent_key(protocol, headers) != self.api_key:
            return await self._error(
                writer,
                protocol,
                wire.BadRequest("invalid x-api-key", 401, "authentication_error"),
            )
        try:
            request = (
                wire.openai_request(body)
                if protocol == "openai"
                else wire.anthropic_request(body, headers)
            )
            if protocol == "openai":
                checks.check_response_format(body, self.json_schema_supported)
            forced = checks.forced_tool(protocol, body)
        except wire.BadRequest as exc:
            return await self._error(writer, protocol, exc)
        except (KeyError, TypeError, AttributeError) as exc:
            return await self._error(
                writer, protocol, wire.BadRequest(f"malformed request: {exc!r}")
            )
        if fault is not None and fault.kind in {"status", "auth_echo"}:
            return await self._status_fault(writer, protocol, fault, headers)
        if fault is not None and fault.kind == "hang":
            await asyncio.sleep(fault.seconds)
            return False
        if fault is not None and fault.kind == "recorded_stream":
            return await self._recorded_stream(writer, fault)
        with self._lock:
            self._player.requests.append(request)
            try:  # a faulty answer leaves the turn for the retry
                turn = self._player.pick(
                    request, consume=fault is None or fault.kind in {"ignore_stream", "shaped"}
                )
            except ScriptExhaustedError as exc:
                exhausted = wire.BadRequest(str(exc), 400, "script_exhausted")
            else:
                exhausted = None
        if exhausted is not None:
            return await self._error(writer, protocol, exhausted)
        if fault is None and turn.fail:
            fault = _SCRIPT_FAILS[turn.fail]
            if fault.kind in {"status", "hang"}:
                return await self._handle_fault_now(writer, protocol, fault, headers)
        answer = self._answer(
            protocol, body, turn, empty=fault is not None and fault.kind == "empty", forced=forced
        )
        if fault is not None and fault.kind == "ignore_stream":
            return await self._complete(writer, protocol, body, answer, None)
        if fault is not None and fault.kind == "shaped":
            if fault.pieces is not None:
                answer.pieces, answer.text = list(fault.pieces), "".join(fault.pieces)
            if fault.reasoning:
                answer.thinking = "".join(fault.reasoning)
                answer.thinking_cut = list(fault.reasoning)
            fault = None
        if body.get("stream"):
            return await self._stream(writer, protocol, body, answer, fault)
        return await self._complete(writer, protocol, body, answer, fault)

    async def _handle_fault_now(self, writer, protocol, fault: Fault, headers) -> bool:
        if fault.kind == "hang":
            await asyncio.sleep(fault.seconds)
            return False
        return await self._status_fault(writer, protocol, fault, headers)

    def _take_fault(self, model: str | None) -> Fault | None:
        for index, fault in enumerate(self._faults):
            if fault.model is None or fault.model == model:
                del self._faults[index]
                return fault
        return None

    @staticmethod
    def _sent_key(protocol: str, headers: dict[str, str]) -> str | None:
        if protocol == "anthropic":
            return headers.get("x-api-key")
        value = headers.get("authorization", "")
        return value.removeprefix("Bearer ") if value.startswith("Bearer ") else None

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
                usage = self._anthropic_cache.account(wire.anthropic_cache_blocks(body))
            else:
                usage = self._openai_cache.account(wire.openai_prompt_text(body))
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

    # ── responses ─────────────────────────────────────────────────────────────────────────────
    async def _send_head(self, writer, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
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
            wire.openai_completion(body, answer, next(self._ids), self.reasoning_field)
            if protocol == "openai"
            else wire.anthropic_message(body, answer, next(self._ids))
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
            wire.openai_events(body, answer, next(self._ids), self.reasoning_field)
            if protocol == "openai"
            else wire.anthropic_events(body, answer, next(self._ids))
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


# ── running it elsewhere ───────────────────────────────────────────────────────────────────────
@contextlib.contextmanager
def running_in_subprocess(
    *,
    script: str | os.PathLike[str] | None = None,
    ttft: float = 0.0,
    tps: float | None = None,
    record_chunks: bool = False,
) -> Iterator[str]:
    """The server in its own Python process (benchmarks: no GIL shared with the client).
    Yields its base URL. Faults and the Python control API are not available this way."""
    command = [sys.executable, "-m", "tests.fakes.llm_server", "--port", "0", "--ttft", str(ttft)]
    if script is not None:
        command += ["--script", str(script)]
    if tps is not None:
        command += ["--tps", str(tps)]
    if record_chunks:
        command.append("--record-chunks")
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline() if process.stdout else ""
        found = re.search(r"http://\S+", line)
        if not found:
            raise RuntimeError(f"the fake LLM server did not start (it printed {line!r})")
        yield found.group()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake OpenAI + Anthropic LLM server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--script", help="script YAML (the scripted provider's format)")
    parser.add_argument("--ttft", type=float, default=0.0, help="seconds before the first token")
    parser.add_argument("--tps", type=float, default=None, help="tokens per second")
    parser.add_argument("--api-key", default=None, help="refuse requests without this key")
    parser.add_argument(
        "--record-chunks", action="store_true", help="keep chunk send times (GET /_chunks)"
    )
    args = parser.parse_args(argv)
    server = FakeLLMServer(
        args.script,
        ttft=args.ttft,
        tokens_per_second=args.tps,
        api_key=args.api_key,
        host=args.host,
        port=args.port,
        record_chunks=args.record_chunks,
    ).start()
    print(
        f"fake LLM server on {server.url} (OpenAI base_url {server.openai_base_url}, "
        f"Anthropic base_url {server.anthropic_base_url}); Ctrl-C stops it",
        flush=True,
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "DEFAULT_SCRIPT",
    "FakeLLMServer",
    "Fault",
    "RecordedRequest",
    "running_in_subprocess",
]
