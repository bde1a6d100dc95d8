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
[--tps N]`; `llm_process.running_in_subprocess(...)` does that for benchmarks (no faults there).
Its faults are in llm_faults.py, how it writes answers in llm_responses.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import ssl
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from apps.engine.llm.cachesim import BreakpointCache, PrefixCache
from apps.engine.llm.errors import ScriptExhaustedError
from apps.engine.llm.providers.scripted import ScriptedProvider
from tests.fakes import llm_checks as checks
from tests.fakes.llm_faults import SCRIPT_FAILS, Fault
from tests.fakes.llm_responses import Responses
from tests.fakes.llm_wire_anthropic import anthropic_request
from tests.fakes.llm_wire_openai import openai_request

DEFAULT_SCRIPT = [{"text": "Hello from the fake LLM server.", "repeat": True}]


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
class FakeLLMServer(Responses):
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
        json_schema_refusal_status: int = 400,
        null_content_rejected: bool = False,
        usage_block: bool = True,
        repeated_call_ids: bool = False,
    ):
        """`ssl_context` (a server-side context): serve HTTPS instead of HTTP.
        `reasoning_field`: the OpenAI delta field a turn's `thinking` streams in
        (`reasoning_content` as DeepSeek and Qwen, `reasoning` as OpenRouter).
        Server differences of the llama.cpp family: `json_schema_refusal_status` (500: the
        refusal of json_schema is a server error naming `response_format`),
        `null_content_rejected` (an assistant message with `content: null` gets HTTP 500),
        `usage_block=False` (no usage in answers, streamed or not), `repeated_call_ids` (every
        streamed tool-call fragment repeats the call's id and function name)."""
        self.repeated_call_ids = repeated_call_ids
        self.json_schema_refusal_status = json_schema_refusal_status
        self.null_content_rejected = null_content_rejected
        self.usage_block = usage_block
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
        if (method == "GET" and path_only == "/props") or path_only == "/api/show":
            # what a server says of itself (Gateway.context_window asks): not a model call,
            # not recorded; this fake reports no window
            # (no request id: the answers' ids stay what they are without the question)
            data = json.dumps({"error": {"message": f"no route {path}"}}).encode()
            head = {"content-type": "application/json", "content-length": str(len(data))}
            await self._send_head(writer, 404, head)
            writer.write(data)
            await writer.drain()
            return True
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
            return await self._error(
                writer, protocol, checks.BadRequest("request body is not JSON")
            )
        if self.api_key is not None and self._sent_key(protocol, headers) != self.api_key:
            return await self._error(
                writer,
                protocol,
                checks.BadRequest("invalid x-api-key", 401, "authentication_error"),
            )
        try:
            request = (
                openai_request(body) if protocol == "openai" else anthropic_request(body, headers)
            )
            if protocol == "openai":
                checks.check_response_format(
                    body, self.json_schema_supported, self.json_schema_refusal_status
                )
                if self.null_content_rejected:
                    checks.check_null_content(body)
            forced = checks.forced_tool(protocol, body)
        except checks.BadRequest as exc:
            return await self._error(writer, protocol, exc)
        except (KeyError, TypeError, AttributeError) as exc:
            return await self._error(
                writer, protocol, checks.BadRequest(f"malformed request: {exc!r}")
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
                exhausted = checks.BadRequest(str(exc), 400, "script_exhausted")
            else:
                exhausted = None
        if exhausted is not None:
            return await self._error(writer, protocol, exhausted)
        if fault is None and turn.fail:
            fault = SCRIPT_FAILS[turn.fail]
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


if __name__ == "__main__":
    from tests.fakes.llm_process import main

    raise SystemExit(main())


__all__ = ["DEFAULT_SCRIPT", "FakeLLMServer", "Fault", "RecordedRequest"]
