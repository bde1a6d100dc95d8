"""Retries, fallbacks, timeouts, typed errors and cost: each fault of the fake server ends in the
right typed error or a successful retry / fallback."""

from __future__ import annotations

import asyncio

import pytest

from apps.engine.config import ModelPrice, parse_config
from apps.engine.llm import (
    AuthenticationError,
    ChatResponse,
    ContextWindowError,
    EmptyResponseError,
    Gateway,
    LLMConfigurationError,
    LLMConnectionError,
    LLMStatusError,
    LLMTimeoutError,
    RateLimitError,
    Usage,
    cost_of,
)
from tests.engine.llm.conftest import ask, config_for, recording
from tests.fakes.llm_server import Fault
from tests.support import free_port

PROVIDERS = ["openai", "anthropic"]
ANSWER = "All good here, thanks for asking."


async def run_stream(gateway: Gateway, **kwargs):
    """(visible text as a UI would show it, honouring restarts; restarts seen; response)."""
    shown, restarts, response = "", 0, None
    async for delta in gateway.stream(ask(), **kwargs):
        if delta.restart:
            shown, restarts = "", restarts + 1
        elif delta.response is not None:
            response = delta.response
        else:
            shown += delta.text
    return shown, restarts, response


@pytest.fixture
def answering(llm_server):
    llm_server.set_script([{"text": ANSWER, "repeat": True}])
    return llm_server


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
async def test_malformed_sse_line_fails_the_attempt_and_the_retry_succeeds(
    answering, recorded_sleep, provider
):
    answering.fail_next(Fault.malformed_sse(after_chunks=2))
    async with Gateway(config_for(answering, {"main": provider}), sleep=recorded_sleep) as gateway:
        shown, restarts, response = await run_stream(gateway)
    assert restarts == 1
    assert shown == response.content == ANSWER
    assert response.attempts == 2


async def test_malformed_sse_without_retries_is_a_connection_error(answering):
    answering.fail_next(Fault.malformed_sse())
    config = config_for(answering, {"main": "openai"}, attempts=1)
    async with Gateway(config) as gateway:
        with pytest.raises(LLMConnectionError, match="malformed stream event"):
            await run_stream(gateway)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_error_event_after_200_restarts_the_stream_on_the_retry(
    answering, recorded_sleep, provider
):
    answering.fail_next(Fault.error_event(after_chunks=3))
    async with Gateway(config_for(answering, {"main": provider}), sleep=recorded_sleep) as gateway:
        shown, restarts, response = await run_stream(gateway)
    assert (restarts, shown, response.content) == (1, ANSWER, ANSWER)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_error_event_after_200_is_a_typed_status_error_when_retries_are_spent(
    answering, provider
):
    answering.fail_next(Fault.error_event(error_type="overloaded_error"))
    config = config_for(answering, {"main": provider}, attempts=1)
    async with Gateway(config) as gateway:
        with pytest.raises(LLMStatusError, match="error event in the stream") as info:
            await run_stream(gateway)
    assert info.value.retryable


GROQ_TOOL_USE_FAILED = {
    "message": "Failed to call a function. Please adjust your prompt. See 'failed_generation'.",
    "type": "invalid_request_error",
    "code": "tool_use_failed",
    "failed_generation": '<function=read_file{"path": "a.py"}</function>',
}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_in_stream_invalid_request_error_is_a_bad_request_and_not_retried(
    answering, recorded_sleep, provider
):
    answering.fail_next(Fault.stream_error(GROQ_TOOL_USE_FAILED, after_chunks=2))
    config = config_for(answering, {"main": provider}, attempts=3)
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        with pytest.raises(
            LLMStatusError, match="invalid_request_error: Failed to call a function"
        ) as info:
            await run_stream(gateway)
    assert (info.value.status_code, info.value.retryable) == (400, False)
    assert len(answering.requests) == 1 and recorded_sleep.waits == []


async def test_error_body_in_a_200_json_answer_is_classified_by_its_type(answering, recorded_sleep):
    answering.fail_next(Fault.error_event(error_type="invalid_request_error"))
    config = config_for(answering, {"main": "openai"}, attempts=3)
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        with pytest.raises(LLMStatusError) as info:
            await gateway.complete(ask())
    assert (info.value.status_code, info.value.retryable) == (400, False)
    assert len(answering.requests) == 1 and not answering.requests[0].stream


async def test_anthropic_server_side_tools_over_http_give_only_the_real_tool_call(answering):
    answering.fail_next(Fault.recorded_stream(recording("anthropic_server_tools.sse"), 48))
    async with Gateway(config_for(answering, {"main": "anthropic"})) as gateway:
        shown, _, response = await run_stream(gateway)
    (call,) = response.tool_calls
    assert (call.id, call.name, call.arguments) == (
        "toolu_01RealRead",
        "read_file",
        {"path": "textkit/slug.py", "symbol": "slugify"},
    )
    assert shown == response.content and response.content.endswith("read our slugify.")


async def test_in_stream_rate_limit_error_is_a_rate_limit_error_and_retried(
    answering, recorded_sleep
):
    error = {"message": "Rate limit reached", "type": "tokens", "code": "rate_limit_exceeded"}
    answering.fail_next(Fault.stream_error(error))
    async with Gateway(config_for(answering, {"main": "openai"}), sleep=recorded_sleep) as gateway:
        shown, restarts, response = await run_stream(gateway)
    assert (restarts, shown, response.content) == (1, ANSWER, ANSWER)
    assert len(answering.requests) == 2
    answering.reset()
    answering.fail_next(*[Fault.stream_error(error)] * 3)
    async with Gateway(config_for(answering, {"main": "openai"}), sleep=recorded_sleep) as gateway:
        with pytest.raises(RateLimitError):
            await run_stream(gateway)
    assert len(answering.requests) == 3


async def test_in_stream_server_error_is_retried(answering, recorded_sleep):
    error = {"message": "The server had an error processing your request.", "type": "server_error"}
    answering.fail_next(Fault.stream_error(error))
    async with Gateway(config_for(answering, {"main": "openai"}), sleep=recorded_sleep) as gateway:
        _, restarts, response = await run_stream(gateway)
    assert (restarts, response.content, len(answering.requests)) == (1, ANSWER, 2)


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


async def test_disconnect_mid_stream_is_retried_with_a_restart(answering, recorded_sleep):
    answering.fail_next(Fault.disconnect(after_chunks=2))
    async with Gateway(config_for(answering, {"main": "openai"}), sleep=recorded_sleep) as gateway:
        shown, restarts, response = await run_stream(gateway)
    assert (restarts, shown, response.attempts) == (1, ANSWER, 2)


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


async def test_failing_main_falls_back_to_the_next_alias(answering, recorded_sleep):
    answering.fail_next(*[Fault.http_error(500, model="main-model")] * 3)
    config = config_for(
        answering, {"main": "openai", "backup": "anthropic"}, fallbacks={"main": ["backup"]}
    )
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        shown, _, response = await run_stream(gateway)
    assert (response.alias, response.model, response.attempts) == ("backup", "backup-model", 4)
    assert [r.model for r in answering.requests] == ["main-model"] * 3 + ["backup-model"]
    assert shown == ANSWER


async def test_authentication_failure_falls_back_at_once_without_retrying(
    answering, recorded_sleep
):
    answering.fail_next(Fault.http_error(401, model="main-model"))
    config = config_for(
        answering, {"main": "anthropic", "backup": "openai"}, fallbacks={"main": ["backup"]}
    )
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        response = await gateway.complete(ask())
    assert response.alias == "backup"
    assert len(answering.requests) == 2 and recorded_sleep.waits == []


async def test_fallbacks_false_tries_only_the_named_alias(answering, recorded_sleep):
    answering.fail_next(Fault.http_error(401, model="main-model"))
    config = config_for(
        answering, {"main": "openai", "backup": "openai"}, fallbacks={"main": ["backup"]}
    )
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        with pytest.raises(AuthenticationError):
            await gateway.complete(ask(), fallbacks=False)
    assert len(answering.requests) == 1


async def test_every_alias_failing_raises_the_last_error_with_a_summary(answering, recorded_sleep):
    answering.fail_next(*[Fault.http_error(502)] * 2)
    config = config_for(
        answering,
        {"main": "openai", "backup": "anthropic"},
        fallbacks={"main": ["backup"]},
        attempts=1,
    )
    async with Gateway(config, sleep=recorded_sleep) as gateway:
        with pytest.raises(LLMStatusError) as info:
            await gateway.complete(ask())
    assert info.value.status_code == 502
    assert "backup (anthropic backup-model)" in str(info.value)
    assert "main: LLMStatusError, backup: LLMStatusError" in "".join(info.value.__notes__)


async def test_named_model_alias_is_used(answering):
    config = config_for(answering, {"main": "openai", "fast": "anthropic"})
    async with Gateway(config) as gateway:
        response = await gateway.complete(ask(), model="fast")
        assert gateway.auxiliary_alias == "main"
    assert (response.alias, answering.requests[0].protocol) == ("fast", "anthropic")


async def test_unknown_alias_is_a_configuration_error_listing_the_known_ones(answering):
    async with Gateway(config_for(answering, {"main": "openai"})) as gateway:
        with pytest.raises(
            LLMConfigurationError, match=r"unknown model alias 'nope' \(configured: main\)"
        ):
            await gateway.complete(ask(), model="nope")


async def test_missing_api_key_variable_is_reported_before_any_request(answering, monkeypatch):
    monkeypatch.delenv("AGENTKIT_TEST_MISSING_KEY", raising=False)
    entry = answering.model_entry("openai", api_key_env="AGENTKIT_TEST_MISSING_KEY")
    async with Gateway(config_for(answering, {"main": entry})) as gateway:
        with pytest.raises(LLMConfigurationError, match="AGENTKIT_TEST_MISSING_KEY is not set"):
            await gateway.complete(ask())
    assert answering.requests == []


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


async def test_cost_prices_uncached_input_cache_reads_writes_and_output_separately(answering):
    price = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
    entry = answering.model_entry("anthropic", price=price)
    answering.set_script(
        [
            {
                "text": "ok",
                "usage": {
                    "input_tokens": 10_000,
                    "output_tokens": 1_000,
                    "cache_read_tokens": 6_000,
                    "cache_write_tokens": 2_000,
                },
            }
        ]
    )
    async with Gateway(config_for(answering, {"main": entry})) as gateway:
        response = await gateway.complete(ask())
    assert response.usage == Usage(10_000, 1_000, 6_000, 2_000)
    expected = (2_000 * 3.0 + 6_000 * 0.3 + 2_000 * 3.75 + 1_000 * 15.0) / 1e6
    assert response.cost == pytest.approx(expected)


def test_unset_cache_prices_are_charged_at_the_input_price():
    price = ModelPrice.model_validate({"input": 2.0, "output": 8.0})
    usage = Usage(input_tokens=1_000_000, output_tokens=0, cache_read_tokens=500_000)
    assert cost_of(usage, price) == pytest.approx(2.0)
    explicit_free = ModelPrice.model_validate({"input": 2.0, "cache_read": 0.0})
    assert cost_of(usage, explicit_free) == pytest.approx(1.0)


async def test_stream_consumer_that_stops_early_leaves_the_gateway_usable(answering):
    async with Gateway(config_for(answering, {"main": "openai"})) as gateway:
        stream = gateway.stream(ask())
        async for delta in stream:
            assert delta.text
            break
        await stream.aclose()
        response = await gateway.complete(ask())
    assert isinstance(response, ChatResponse) and response.content == ANSWER


async def test_should_retry_false_from_the_service_stops_retries(answering, recorded_sleep):
    answering.fail_next(Fault.http_error(500, headers=(("x-should-retry", "false"),)))
    async with Gateway(config_for(answering, {"main": "openai"}), sleep=recorded_sleep) as gateway:
        with pytest.raises(LLMStatusError):
            await gateway.complete(ask())
    assert len(answering.requests) == 1


async def test_cancelling_a_streamed_call_propagates_and_frees_the_gateway(answering):
    answering.tokens_per_second = 20  # ~50 ms per piece: plenty of time to cancel
    got_text = asyncio.Event()

    async def consume(gateway):
        async for delta in gateway.stream(ask()):
            if delta.text:
                got_text.set()

    async with Gateway(config_for(answering, {"main": "anthropic"})) as gateway:
        task = asyncio.create_task(consume(gateway))
        await asyncio.wait_for(got_text.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        answering.tokens_per_second = None
        response = await gateway.complete(ask())
    assert response.content == ANSWER and response.attempts == 1
