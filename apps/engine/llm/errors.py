"""The one error hierarchy of the LLM layer. Callers catch the class they can act on.

    LLMError
    ├── LLMStatusError(status_code, body, request_id)   the endpoint answered with an error
    │   ├── RateLimitError                              429
    │   ├── AuthenticationError                         401 / 403
    │   └── ContextWindowError                          the prompt does not fit the model
    ├── LLMConnectionError                              no (complete) answer: refused, reset, cut stream
    │   └── LLMTimeoutError                             connect or read timeout
    ├── EmptyResponseError                              no text and no tool calls
    ├── ScriptExhaustedError                            scripted provider: no turn answers this call
    └── LLMConfigurationError                           unknown alias, missing API key variable

`retryable` tells the gateway whether the same call may succeed when repeated. Messages never
contain API keys: providers scrub them before an error is built. Constructors never log.
"""

from __future__ import annotations

import json
from typing import Any

# Phrases endpoints use when the prompt is longer than the context window (OpenAI, Anthropic,
# vLLM, Ollama, llama.cpp, DeepSeek, Bailian word it differently).
_CONTEXT_HINTS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "context size",  # llama.cpp: "exceeds the available context size" (exceed_context_size_error)
    "context_size",
    "n_ctx",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "exceeds the context",
    "input is too long",
    "reduce the length",
)


# What the `code` or `type` of a JSON error object stands for, as an HTTP status. Used for error
# objects that arrive inside an HTTP 200 answer (an `error` event, an `{"error": ...}` chunk), so
# they are classified like the same error sent with its status. `code` is looked up before
# `type` (OpenAI's rate limits say `type: tokens`, `code: rate_limit_exceeded`).
ERROR_KIND_STATUS = {
    "invalid_request_error": 400,  # OpenAI, Anthropic, Groq
    "tool_use_failed": 400,  # Groq: the model's tool call could not be parsed
    "context_length_exceeded": 400,
    "bad_request": 400,
    "invalid_api_key": 401,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "api_error": 500,
    "server_error": 500,
    "internal_error": 500,
    "internal_server_error": 500,
    "service_unavailable": 503,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class LLMError(Exception):
    """Base class of every failure of an LLM call."""

    retryable: bool = False


class LLMStatusError(LLMError):
    """The endpoint answered with an error status (or an error event after HTTP 200).

    `body` is the parsed JSON error body when there is one, else the text; `retry_after` is the
    wait in seconds the endpoint asked for, if any.
    """

    def __init__(
        self,
        status_code: int,
        body: Any = None,
        request_id: str | None = None,
        *,
        message: str | None = None,
        retry_after: float | None = None,
        should_retry: bool | None = None,
    ):
        self.status_code = status_code
        self.body = body
        self.request_id = request_id
        self.retry_after = retry_after
        self._should_retry = should_retry
        text = message or f"HTTP {status_code}: {error_detail(body) or 'no detail'}"
        if request_id:
            text += f" [request_id={request_id}]"
        super().__init__(text)

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        if self._should_retry is not None:  # the endpoint's own x-should-retry header wins
            return self._should_retry
        return self.status_code in {408, 409, 429} or self.status_code >= 500

    def __reduce__(self):
        return (
            _rebuild_status_error,
            (type(self), self.status_code, self.body, self.request_id, str(self), self.retry_after),
        )


def _rebuild_status_error(cls, status_code, body, request_id, message, retry_after):
    error = cls(status_code, body, request_id, retry_after=retry_after)
    error.args = (message,)
    return error


class RateLimitError(LLMStatusError):
    """429: too many requests or tokens; retried after `retry_after` when the endpoint says."""


class AuthenticationError(LLMStatusError):
    """401/403: the key is missing, wrong or not allowed to use this model. Never retried."""


class ContextWindowError(LLMStatusError):
    """The prompt does not fit the model's context window: compress, or pick a larger model."""


class LLMConnectionError(LLMError):
    """No complete answer arrived: connection refused or reset, stream cut before its end,
    or a response that is not the protocol at all."""

    retryable = True


class LLMTimeoutError(LLMConnectionError):
    """Connecting or waiting for the next bytes took longer than `llm.timeout`."""


class EmptyResponseError(LLMError):
    """The model answered with neither text nor tool calls; counts as a failed call."""

    retryable = True


class ScriptExhaustedError(LLMError):
    """The scripted provider has no turn left that answers this call."""


class LLMConfigurationError(LLMError):
    """The call cannot be made as configured: unknown model alias, missing API key variable,
    unreadable script. Fix agentkit.yaml or the environment; retrying does not help."""


def error_detail(body: Any) -> str:
    """The human-readable part of an error body, whatever the provider's shape."""
    if body is None:
        return ""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = error.get("message") or error.get("msg") or error.get("detail")
            kind = error.get("type") or error.get("code")
            if message and kind and str(kind) not in str(message):
                return f"{kind}: {message}"
            if message or kind:
                return str(message or kind)
        elif isinstance(error, str):
            return error
        if "detail" in body:
            return str(body["detail"])
        return json.dumps(body, sort_keys=True)[:500]
    return str(body).strip()[:500]


# Words of a refusal that is about a request feature, not an outage: the server lacks it.
_CAPABILITY_WORDS = ("response_format", "json_schema", "tool_choice", "grammar")


def names_capability(body: Any) -> bool:
    """Whether an error body names a structured-output feature (response_format, json_schema,
    tool_choice, grammar): the server refuses the feature, and asking again will not help."""
    text = json.dumps(body) if isinstance(body, dict | list) else str(body or "")
    return any(word in text.lower() for word in _CAPABILITY_WORDS)


def looks_like_context_overflow(body: Any) -> bool:
    text = json.dumps(body).lower() if isinstance(body, dict | list) else str(body or "").lower()
    return any(hint in text for hint in _CONTEXT_HINTS)


def status_of_error_body(body: Any, default: int = 500) -> int:
    """The HTTP status an error body stands for when it came without one (inside a 200 stream):
    an explicit numeric `status`/`status_code`/`code`, else its `code`, else its `type`
    (ERROR_KIND_STATUS), else `default` (treated as a server error: retried)."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return default
    for key in ("status", "status_code", "code"):
        value = error.get(key)
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600:
            return value
    for key in ("code", "type"):
        status = ERROR_KIND_STATUS.get(str(error.get(key)).lower())
        if status is not None:
            return status
    return default


def body_error(body: Any, request_id: str | None = None, *, prefix: str = "") -> LLMStatusError:
    """The typed error for an error body that arrived without an error status (in a 200
    stream or a 200 JSON answer): classified by `status_error` like the HTTP path, with the
    status `status_of_error_body` reads from the body."""
    return status_error(status_of_error_body(body), body, request_id, prefix=prefix)


def status_error(
    status_code: int,
    body: Any,
    request_id: str | None = None,
    *,
    prefix: str = "",
    suffix: str = "",
    retry_after: float | None = None,
    should_retry: bool | None = None,
) -> LLMStatusError:
    """The most specific LLMStatusError subclass for this status and body."""
    if status_code == 429:
        cls: type[LLMStatusError] = RateLimitError
    elif status_code in {401, 403}:
        cls = AuthenticationError
    elif status_code == 413 or (status_code in {400, 422} and looks_like_context_overflow(body)):
        cls = ContextWindowError
    else:
        cls = LLMStatusError
    detail = error_detail(body) or "no detail"
    message = f"{prefix}HTTP {status_code}: {detail}{suffix}"
    if cls is LLMStatusError and should_retry is None and names_capability(body):
        should_retry = False  # a feature the server lacks (response_format ...): never retried
    return cls(
        status_code,
        body,
        request_id,
        message=message,
        retry_after=retry_after,
        should_retry=should_retry,
    )
