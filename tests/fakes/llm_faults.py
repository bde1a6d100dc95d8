"""Faults the fake LLM server (llm_server.py) applies on demand, one per request, in order
(optionally only to requests for one model): an error status (500, 429 with retry-after, ...),
a hang until the client times out, a malformed SSE line, an `error` event after HTTP 200 (or any
given error object, e.g. Groq's `tool_use_failed`), a recorded SSE body replayed byte for byte,
a disconnect mid-stream, an empty answer, a 401 that echoes the API key, a context-window 400,
one JSON body for a streaming request; and a misbehaving model's text (`Fault.shaped`): exact
stream pieces (an emoji cut between two, a lone surrogate, NUL, control characters) and
reasoning sent before the text. `SCRIPT_FAILS`: the fault a script turn's `fail:` stands for."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


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


SCRIPT_FAILS = {
    "server_error": Fault.http_error(500),
    "rate_limit": Fault.rate_limit(retry_after=0.0),
    "auth": Fault("status", status=401, message="invalid api key"),
    "context_window": Fault.context_window(),
    "timeout": Fault.hang(),
    "connection": Fault.disconnect(after_chunks=0),
    "empty": Fault.empty(),
}
