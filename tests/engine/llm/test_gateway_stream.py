"""Gateway streaming: faults inside a stream after the 200 (malformed SSE, error events, a drop
mid-stream) restart it on the retry or end in a typed error; server-side tools, a consumer that
stops early and a cancelled stream."""

from __future__ import annotations

import asyncio

import pytest

from apps.engine.llm import (
    ChatResponse,
    Gateway,
    LLMConnectionError,
    LLMStatusError,
    RateLimitError,
)
from tests.engine.llm.conftest import ANSWER, PROVIDERS, ask, config_for, recording, run_stream
from tests.fakes.llm_server import Fault


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


async def test_disconnect_mid_stream_is_retried_with_a_restart(answering, recorded_sleep):
    answering.fail_next(Fault.disconnect(after_chunks=2))
    async with Gateway(config_for(answering, {"main": "openai"}), sleep=recorded_sleep) as gateway:
        shown, restarts, response = await run_stream(gateway)
    assert (restarts, shown, response.attempts) == (1, ANSWER, 2)


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


async def test_stream_consumer_that_stops_early_leaves_the_gateway_usable(answering):
    async with Gateway(config_for(answering, {"main": "openai"})) as gateway:
        stream = gateway.stream(ask())
        async for delta in stream:
            assert delta.text
            break
        await stream.aclose()
        response = await gateway.complete(ask())
    assert isinstance(response, ChatResponse) and response.content == ANSWER


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
