"""What every provider offers the gateway, and the HTTP plumbing the HTTP providers share.

A provider serves one model alias. `generate(request, stream=...)` is an async generator: text
deltas (and reasoning deltas, `StreamDelta.reasoning`) while they arrive (stream=True only), then
one `StreamDelta(response=...)`. It raises `LLMError` subclasses only; retries, fallbacks, cost
and the empty-answer rule live in the gateway.

`HTTPProvider` holds what OpenAI and Anthropic share: the API key read from the environment at
call time (never stored in a repr, scrubbed from every error text), timeouts, mapping of httpx
failures and error statuses to typed errors, and the SSE read loop. Subclasses supply the pure
parts: `build_body`, `parse_response`, `accumulate`.
"""

from __future__ import annotations

import email.utils
import json
import os
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar, Protocol

import httpx

from apps.engine.config import AgentkitConfig, ModelConfig
from apps.engine.llm.errors import (
    LLMConfigurationError,
    LLMConnectionError,
    LLMStatusError,
    LLMTimeoutError,
    body_error,
    status_error,
)
from apps.engine.llm.sse import ServerSentEvent, SSEDecoder, StreamSnapshot
from apps.engine.llm.types import ChatRequest, ChatResponse, StreamDelta

REDACTED = "[redacted]"


class Provider(Protocol):
    alias: str
    model: ModelConfig

    def generate(self, request: ChatRequest, *, stream: bool) -> AsyncIterator[StreamDelta]: ...


def public_url(url: str) -> str:
    """The URL without user info or query string: safe for messages and logs."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "(invalid URL)"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path}"


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from `retry-after-ms`, `retry-after` (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def parse_should_retry(headers: httpx.Headers) -> bool | None:
    value = (headers.get("x-should-retry") or "").strip().lower()
    return {"true": True, "false": False}.get(value)


class HTTPProvider:
    """Base of the providers that speak HTTP + JSON + SSE."""

    kind: ClassVar[str]
    request_id_headers: ClassVar[tuple[str, ...]] = ("x-request-id", "request-id")
    # OpenAI-compatible servers that never send `data: [DONE]` still end cleanly after a finish
    # reason; Anthropic always sends `message_stop`, so there the end marker is required.
    require_done: ClassVar[bool] = True

    def __init__(
        self, alias: str, model: ModelConfig, config: AgentkitConfig, client: httpx.AsyncClient
    ):
        self.alias = alias
        self.model = model
        self._client = client
        self._timeout = httpx.Timeout(
            connect=config.llm.timeout.connect,
            read=config.llm.timeout.read,
            write=config.llm.timeout.read,
            pool=config.llm.timeout.connect,
        )
        self._read_timeout = config.llm.timeout.read
        self._connect_timeout = config.llm.timeout.connect

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.alias}: {self.model.model} at {self.public_endpoint}>"

    # ── subclass hooks (pure) ─────────────────────────────────────────────────────────────────
    @property
    def endpoint(self) -> str:
        raise NotImplementedError

    def auth_headers(self, api_key: str) -> dict[str, str]:
        raise NotImplementedError

    def build_body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    def parse_response(self, data: Any) -> ChatResponse:
        raise NotImplementedError

    def accumulate(self, event: ServerSentEvent, snapshot: StreamSnapshot) -> str:
        raise NotImplementedError

    # ── shared ────────────────────────────────────────────────────────────────────────────────
    @property
    def label(self) -> str:
        return f"{self.alias} ({self.kind} {self.model.model})"

    @property
    def public_endpoint(self) -> str:
        return public_url(self.endpoint)

    def _api_key(self) -> str | None:
        name = self.model.api_key_env
        if not name:
            return None
        value = os.environ.get(name, "").strip()
        if not value:
            raise LLMConfigurationError(
                f"{self.label}: environment variable {name} is not set. Export it with the API "
                f"key (export {name}=...), or remove models.{self.alias}.api_key_env for an "
                f"endpoint that needs no key."
            )
        return value

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            headers.update(self.auth_headers(api_key))
        return headers

    async def generate(self, request: ChatRequest, *, stream: bool) -> AsyncIterator[StreamDelta]:
        api_key = self._api_key()
        scrub = _scrubber(api_key)
        body = self.build_body(request, stream=stream)
        headers = self._headers(api_key)
        if stream:
            headers["accept"] = "text/event-stream"
        try:
            if not stream:
                response = await self._client.post(
                    self.endpoint, json=body, headers=headers, timeout=self._timeout
                )
                self._raise_for_status(response.status_code, response.headers, response.text, scrub)
                yield StreamDelta(
                    response=self._finish_json(response.text, response.headers, scrub)
                )
                return
            async with self._client.stream(
                "POST", self.endpoint, json=body, headers=headers, timeout=self._timeout
            ) as response:
                if response.status_code >= 400:
                    text = (await response.aread()).decode("utf-8", "replace")
                    self._raise_for_status(response.status_code, response.headers, text, scrub)
                content_type = response.headers.get("content-type", "")
                if "json" in content_type and "event-stream" not in content_type:
                    # The endpoint ignored `stream: true` and answered in one piece.
                    text = (await response.aread()).decode("utf-8", "replace")
                    yield StreamDelta(response=self._finish_json(text, response.headers, scrub))
                    return
                snapshot = StreamSnapshot(request_id=self._request_id(response.headers))
                decoder = SSEDecoder()
                async for chunk in response.aiter_bytes():
                    for event in decoder.feed(chunk):
                        text = self._accumulate(event, snapshot, scrub)
                        if snapshot.unsent_reasoning:
                            yield StreamDelta(reasoning=snapshot.take_reasoning())
                        if text:
                            yield StreamDelta(text=text)
                        elif snapshot.tool_calls and (calling := snapshot.take_calls()):
                            yield StreamDelta(call=calling)
                for event in decoder.flush():
                    text = self._accumulate(event, snapshot, scrub)
                    if text:
                        yield StreamDelta(text=text)
                try:
                    final = snapshot.finish(require_done=self.require_done)
                except LLMConnectionError as exc:
                    raise LLMConnectionError(f"{self.label}: {exc}") from None
                yield StreamDelta(response=final)
        except httpx.TimeoutException as exc:
            raise LLMTimeoutError(self._timeout_message(exc)) from None
        except httpx.RequestError as exc:
            detail = scrub(str(exc)) or type(exc).__name__
            raise LLMConnectionError(
                f"{self.label}: connection to {self.public_endpoint} failed ({detail}). Check "
                f"models.{self.alias}.base_url and that the server is running."
            ) from None

    def _accumulate(self, event: ServerSentEvent, snapshot: StreamSnapshot, scrub) -> str:
        snapshot.events += 1
        try:
            return self.accumulate(event, snapshot)
        except LLMStatusError as exc:  # an error event after HTTP 200
            error = status_error(
                exc.status_code,
                _scrub_value(exc.body, scrub),
                snapshot.request_id,
                prefix=f"{self.label}: error event in the stream: ",
            )
            raise error from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LLMConnectionError(
                f"{self.label}: malformed stream event ({type(exc).__name__}: {scrub(str(exc))[:200]}"
                f"); data began {scrub(event.data[:120])!r}"
            ) from None

    def _finish_json(self, text: str, headers: httpx.Headers, scrub) -> ChatResponse:
        try:
            data = json.loads(text)
        except ValueError:
            raise LLMConnectionError(
                f"{self.label}: the endpoint answered with something that is not JSON: "
                f"{scrub(text[:200])!r}. Check models.{self.alias}.base_url."
            ) from None
        if isinstance(data, dict) and data.get("error") and not data.get("choices"):
            raise body_error(_scrub_value(data, scrub), self._request_id(headers))
        try:
            response = self.parse_response(data)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            raise LLMConnectionError(
                f"{self.label}: unexpected response shape ({type(exc).__name__}: "
                f"{scrub(str(exc))[:200]})"
            ) from None
        response.request_id = self._request_id(headers)
        return response

    def _raise_for_status(self, status: int, headers: httpx.Headers, text: str, scrub) -> None:
        if status < 400:
            return
        cleaned = scrub(text)
        try:
            body: Any = json.loads(cleaned) if cleaned.strip() else None
        except ValueError:
            body = cleaned.strip()[:2000]
        hint = ""
        if status in {401, 403}:
            hint = (
                f" Check the key in {self.model.api_key_env}."
                if self.model.api_key_env
                else f" The endpoint wants a key: set models.{self.alias}.api_key_env."
            )
        elif status == 404:
            hint = f" Check models.{self.alias}.base_url and models.{self.alias}.model."
        error = status_error(
            status,
            body,
            self._request_id(headers),
            prefix=f"{self.label}: ",
            suffix=hint,
            retry_after=parse_retry_after(headers),
            should_retry=parse_should_retry(headers),
        )
        raise error

    def _request_id(self, headers: httpx.Headers) -> str | None:
        for name in self.request_id_headers:
            if headers.get(name):
                return headers[name]
        return None

    def _timeout_message(self, exc: httpx.TimeoutException) -> str:
        if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
            what, seconds, key = "connecting", self._connect_timeout, "connect"
        else:
            what, seconds, key = "waiting for data", self._read_timeout, "read"
        return (
            f"{self.label}: timed out {what} to {self.public_endpoint} after {seconds:g} s "
            f"(llm.timeout.{key}). Raise it for slow models, or check the server."
        )


def _scrubber(secret: str | None):
    if not secret:
        return lambda text: text
    return lambda text: text.replace(secret, REDACTED) if text else text


def _scrub_value(value: Any, scrub) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _scrub_value(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_value(v, scrub) for v in value]
    return value
