"""Gateway retries and typed errors: HTTP error statuses, rate limits and Retry-After, timeouts,
dropped connections and empty answers each end in the right typed error or a successful retry."""

from __future__ import annotations

import pytest

from apps.engine.config import parse_config
from apps.engine.llm import (
    AuthenticationError,
    ContextWindowError,
    EmptyResponseError,
    Gateway,
    LLMConnectionError,
    LLMStatusError,
    LLMTimeoutError,
    RateLimitError,
)
from tests.engine.llm.conftest import ANSWER, PROVIDERS, ask, config_for, run_stream
from tests.fakes.llm_server import Fault
from tests.support import free_port


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_server_error_is_retried_after_a_backoff_and_then_succeeds(
    answering, recorded_sleep, provider
):
    answering.fail_next(Fault.http_error(500), Fault.http_error(503))
    config = config_for(answering, {"main": provider})
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        _, _, response = await run_stream(gateway)
    assert response.content == ANSWER
    assert response.attempts == 3
    assert len(answering.requests) == 3
    first, second = recorded_sleep.waits
    assert 0.375 <= first <= 0.5 and 0.75 <= second <= 1.0  # doubling, with jitter


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_rate_limit_waits_exactly_what_retry_after_asks(answering, recorded_sleep, provider):
    answering.fail_next(Fault.rate_limit(retry_after=3))
    async with Gateway(config_for(answering, {"main": provider}), sleep=recorded_sleep) as gateway:
        response = await gateway.complete(ask())
    assert response.content == ANSWER
    assert recorded_sleep.waits == [3.0]


async def test_retry_after_is_capped_at_max_backoff(answering, recorded_sleep):
    answering.fail_next(Fault.rate_limit(retry_after=600))
    config = config_for(answering, {"main": "openai"}, max_backoff=2.0)
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        await gateway.complete(ask())
    assert recorded_sleep.waits == [2.0]


async def test_rate_limit_that_persists_ends_in_rate_limit_error(answering, recorded_sleep):
    answering.fail_next(*[Fault.rate_limit(retry_after=0.01)] * 3)
    async with Gateway(config_for(answering, {"main": "openai"}), sleep=recorded_sleep) as gateway:
        with pytest.raises(RateLimitError) as info:
            await gateway.complete(ask())
    assert info.value.status_code == 429 and info.value.retry_after == 0.01
    assert len(answering.requests) == 3
    assert "3 attempts" in "".join(info.value.__notes__)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault.http_error(400, "bad field"), LLMStatusError),
        (Fault.http_error(401, "invalid key"), AuthenticationError),
        (Fault.context_window(), ContextWindowError),
    ],
)
async def test_client_errors_are_not_retried(answering, recorded_sleep, provider, fault, error):
    answering.fail_next(fault)
    async with Gateway(config_for(answering, {"main": provider}), sleep=recorded_sleep) as gateway:
        with pytest.raises(error) as info:
            await gateway.complete(ask())
    assert not info.value.retryable
    assert len(answering.requests) == 1
    assert recorded_sleep.waits == []


async def test_should_retry_false_from_the_service_stops_retries(answering, recorded_sleep):
    answering.fail_next(Fault.http_error(500, headers=(("x-should-retry", "false"),)))
    async with Gateway(config_for(answering, {"main": "openai"}), sleep=recorded_sleep) as gateway:
        with pytest.raises(LLMStatusError):
            await gateway.complete(ask())
    assert len(answering.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_hanging_server_ends_in_a_timeout_error_naming_the_setting(answering, provider):
    answering.fail_next(Fault.hang())
    config = config_for(answering, {"main": provider}, attempts=1, read_timeout=0.2)
    async with Gateway(config) as gateway:
        with pytest.raises(LLMTimeoutError, match=r"llm\.timeout\.read"):
            await run_stream(gateway)


async def test_timeout_is_retried_like_a_connection_error(answering, recorded_sleep):
    answering.fail_next(Fault.hang())
    config = config_for(answering, {"main": "anthropic"}, read_timeout=0.2)
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        response = await gateway.complete(ask())
    assert response.content == ANSWER and response.attempts == 2


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [True, False])
async def test_disconnect_mid_body_is_a_connection_error_never_a_half_answer(
    answering, provider, stream
):
    answering.fail_next(Fault.disconnect(after_chunks=2))
    config = config_for(answering, {"main": provider}, attempts=1)
    async with Gateway(config) as gateway:
        with pytest.raises(LLMConnectionError):
            if stream:
                await run_stream(gateway)
            else:
                await gateway.complete(ask())


async def test_unreachable_endpoint_is_a_connection_error_saying_what_to_check(recorded_sleep):
    config = parse_config(
        {
            "models": {
                "main": {"provider": "openai", "base_url": f"http://127.0.0.1:{free_port()}/v1"}
            },
            "llm": {"retries": {"max_attempts": 2}},
        }
    )
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        with pytest.raises(LLMConnectionError, match=r"Check models\.main\.base_url"):
            await gateway.complete(ask())
    assert len(recorded_sleep.waits) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_empty_answer_counts_as_a_failure_and_is_retried(answering, recorded_sleep, provider):
    answering.fail_next(Fault.empty())
    async with Gateway(config_for(answering, {"main": provider}), sleep=recorded_sleep) as gateway:
        response = await gateway.complete(ask())
    assert response.content == ANSWER and response.attempts == 2


async def test_only_empty_answers_end_in_empty_response_error(answering, recorded_sleep):
    answering.fail_next(*[Fault.empty()] * 2)
    config = config_for(answering, {"main": "anthropic"}, attempts=2)
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        with pytest.raises(EmptyResponseError, match="neither text nor tool calls"):
            await run_stream(gateway)
