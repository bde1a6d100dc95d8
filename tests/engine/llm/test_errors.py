"""The error hierarchy: the right class for each status, retryability, retry-after parsing."""

from __future__ import annotations

import email.utils
import pickle
import time

import httpx
import pytest

from apps.engine.llm import (
    AuthenticationError,
    ContextWindowError,
    EmptyResponseError,
    LLMConnectionError,
    LLMError,
    LLMStatusError,
    LLMTimeoutError,
    RateLimitError,
    ScriptExhaustedError,
)
from apps.engine.llm.errors import status_error
from apps.engine.llm.providers.base import parse_retry_after, public_url


def test_hierarchy_is_the_documented_one():
    assert issubclass(LLMStatusError, LLMError) and issubclass(LLMConnectionError, LLMError)
    for cls in (RateLimitError, AuthenticationError, ContextWindowError):
        assert issubclass(cls, LLMStatusError)
    assert issubclass(LLMTimeoutError, LLMConnectionError)
    assert issubclass(ScriptExhaustedError, LLMError)


@pytest.mark.parametrize(
    ("status", "body", "cls", "retryable"),
    [
        (429, {"error": {"message": "slow down"}}, RateLimitError, True),
        (401, {"error": {"message": "bad key"}}, AuthenticationError, False),
        (403, "forbidden", AuthenticationError, False),
        (
            400,
            {"error": {"code": "context_length_exceeded", "message": "too long"}},
            ContextWindowError,
            False,
        ),
        (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                },
            },
            ContextWindowError,
            False,
        ),
        (413, "request too large", ContextWindowError, False),
        (400, {"error": {"message": "unknown field"}}, LLMStatusError, False),
        (404, {"error": {"message": "model not found"}}, LLMStatusError, False),
        (408, None, LLMStatusError, True),
        (500, None, LLMStatusError, True),
        (
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            LLMStatusError,
            True,
        ),
    ],
)
def test_status_maps_to_the_most_specific_class(status, body, cls, retryable):
    error = status_error(status, body, "req_1")
    assert type(error) is cls
    assert error.retryable is retryable
    assert (error.status_code, error.body, error.request_id) == (status, body, "req_1")
    assert f"HTTP {status}" in str(error) and "[request_id=req_1]" in str(error)


def test_should_retry_header_overrides_the_status_rule():
    assert not status_error(500, None, should_retry=False).retryable
    assert status_error(400, None, should_retry=True).retryable


def test_connection_timeout_and_empty_answers_are_retryable():
    assert LLMConnectionError("x").retryable and LLMTimeoutError("x").retryable
    assert EmptyResponseError("x").retryable
    assert not ScriptExhaustedError("x").retryable


def test_status_errors_survive_pickling_with_their_fields():
    error = status_error(429, {"error": {"message": "slow"}}, "req_9", retry_after=2.5)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is RateLimitError
    assert (copy.status_code, copy.request_id, copy.retry_after, str(copy)) == (
        429,
        "req_9",
        2.5,
        str(error),
    )


def test_constructor_takes_status_body_request_id_positionally():
    error = RateLimitError(429, {"error": {"message": "slow"}}, "req_2")
    assert str(error) == "HTTP 429: slow [request_id=req_2]"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_in_seconds_or_milliseconds(headers, expected):
    assert parse_retry_after(httpx.Headers(headers)) == expected


def test_retry_after_as_http_date():
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= parse_retry_after(httpx.Headers({"retry-after": when})) <= 30


def test_public_url_drops_credentials_and_query():
    assert public_url("https://user:pw@api.example.com:8443/v1/x?key=abc") == (
        "https://api.example.com:8443/v1/x"
    )
