"""OpenAI and Anthropic providers over real HTTP to the fake LLM server."""

from __future__ import annotations

import time

import pytest

from apps.engine.llm import ChatRequest, Gateway, Message, TextBlock
from tests.engine.llm.conftest import TOOLS, ask, config_for, long_system

PROVIDERS = ["openai", "anthropic"]

READ_THEN_ANSWER = [
    {
        "text": "Reading it.",
        "tool_calls": [{"name": "read_file", "arguments": {"path": "textkit/slug.py"}}],
    },
    {"after_tool": "read_file", "match": "def slugify", "text": "It is a one-liner."},
]


async def collect(gateway: Gateway, request: ChatRequest, **kwargs):
    texts, response = [], None
    async for delta in gateway.stream(request, **kwargs):
        if delta.response is not None:
            response = delta.response
        else:
            texts.append(delta.text)
    return texts, response


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_streamed_text_arrives_in_pieces_and_adds_up_to_the_answer(llm_server, provider):
    llm_server.set_script(["The quick brown fox jumps over the lazy dog."])
    async with Gateway(config_for(llm_server, {"main": provider})) as gateway:
        texts, response = await collect(gateway, ask())
    assert len(texts) == 9
    assert "".join(texts) == response.content == "The quick brown fox jumps over the lazy dog."
    assert (response.alias, response.model, response.finish_reason) == (
        "main",
        "main-model",
        "stop",
    )
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.request_id and response.request_id.startswith("req_fake_")


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [True, False])
async def test_tool_call_round_trip_is_accepted_by_the_service(llm_server, provider, stream):
    """The second request carries the assistant's tool call and the tool result; the fake
    service rejects (400) any pairing the real one would reject."""
    llm_server.set_script(READ_THEN_ANSWER)
    async with Gateway(config_for(llm_server, {"main": provider})) as gateway:
        first_request = ask("what does slugify do?", tools=TOOLS)
        if stream:
            _, first = await collect(gateway, first_request)
        else:
            first = await gateway.complete(first_request)
        (call,) = first.tool_calls
        assert (call.name, call.arguments) == ("read_file", {"path": "textkit/slug.py"})
        assert first.finish_reason == "tool_calls"
        follow_up = ChatRequest(
            messages=(
                *first_request.messages,
                Message("assistant", first.content, tuple(first.tool_calls)),
                Message("tool", "def slugify(text): ...", tool_call_id=call.id, name=call.name),
            ),
            tools=TOOLS,
        )
        second = await gateway.complete(follow_up)
    assert second.content == "It is a one-liner."
    assert [r.protocol for r in llm_server.requests] == [provider, provider]


async def test_openai_request_asks_for_usage_in_the_stream_and_sends_a_bearer_key(
    llm_server, monkeypatch
):
    monkeypatch.setenv("FAKE_OPENAI_KEY", "sk-test-openai")
    entry = llm_server.model_entry("openai", api_key_env="FAKE_OPENAI_KEY")
    async with Gateway(config_for(llm_server, {"main": entry})) as gateway:
        await collect(gateway, ask(system=(TextBlock("stable"), TextBlock("volatile"))))
    (request,) = llm_server.requests
    assert request.headers["authorization"] == "Bearer sk-test-openai"
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.body["messages"][0] == {"role": "system", "content": "stable\n\nvolatile"}


async def test_anthropic_request_marks_the_stable_block_and_the_last_message_for_caching(
    llm_server, monkeypatch
):
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "sk-ant-test")
    entry = llm_server.model_entry("anthropic", api_key_env="FAKE_ANTHROPIC_KEY")
    async with Gateway(config_for(llm_server, {"main": entry})) as gateway:
        await gateway.complete(ask(system=long_system(10)))
    (request,) = llm_server.requests
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    stable, volatile = request.body["system"]
    assert stable["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in volatile
    assert request.body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_anthropic_system_is_a_plain_string_without_cache_breakpoints(llm_server):
    async with Gateway(config_for(llm_server, {"main": "anthropic"})) as gateway:
        await gateway.complete(ask(system=(TextBlock("be brief"),)))
    assert llm_server.requests[0].body["system"] == "be brief"


async def test_anthropic_prompt_cache_writes_once_then_reads_the_stable_prefix(llm_server):
    async with Gateway(config_for(llm_server, {"main": "anthropic"})) as gateway:
        first = await gateway.complete(ask("first question", system=long_system()))
        _, second = await collect(gateway, ask("second question", system=long_system()))
    assert first.usage.cache_write_tokens > 1024 and first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens >= 1024
    assert second.usage.cache_read_tokens < second.usage.input_tokens


async def test_openai_automatic_prefix_cache_reports_cached_tokens_in_128_steps(llm_server):
    async with Gateway(config_for(llm_server, {"main": "openai"})) as gateway:
        first = await gateway.complete(ask("first", system=long_system()))
        _, second = await collect(gateway, ask("second", system=long_system()))
    assert first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens >= 1024
    assert (second.usage.cache_read_tokens - 1024) % 128 == 0


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_time_to_first_token_and_token_rate_are_honoured(llm_server, provider):
    llm_server.set_script(["one two three four five"])
    llm_server.ttft = 0.15
    llm_server.tokens_per_second = 100  # 4 more pieces of 1-2 tokens: >= 40 ms
    async with Gateway(config_for(llm_server, {"main": provider})) as gateway:
        started = time.monotonic()
        first_token_at = None
        async for delta in gateway.stream(ask()):
            if delta.text and first_token_at is None:
                first_token_at = time.monotonic() - started
        total = time.monotonic() - started
    assert first_token_at >= 0.15
    assert total - first_token_at >= 0.04


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_parallel_tool_results_go_back_in_the_shape_each_service_requires(
    llm_server, provider
):
    """Anthropic wants both tool_result blocks in one user message; OpenAI wants one tool
    message per call right after the assistant message. The fake service checks both."""
    llm_server.set_script(
        [
            {
                "tool_calls": [
                    {"name": "read_file", "arguments": {"path": "a.py"}},
                    {"name": "read_file", "arguments": {"path": "b.py"}},
                ]
            },
            {"after_tool": "read_file", "match": "contents of b", "text": "Both read."},
        ]
    )
    async with Gateway(config_for(llm_server, {"main": provider})) as gateway:
        first_request = ask("read a and b", tools=TOOLS)
        _, first = await collect(gateway, first_request)
        a, b = first.tool_calls
        follow_up = ChatRequest(
            messages=(
                *first_request.messages,
                Message("assistant", "", (a, b)),
                Message("tool", "contents of a", tool_call_id=a.id),
                Message("tool", "contents of b", tool_call_id=b.id, is_error=False),
                Message("user", "and now?"),
            ),
            tools=TOOLS,
        )
        llm_server.set_script([{"text": "Both read.", "match": "and now"}])
        second = await gateway.complete(follow_up)
    assert second.content == "Both read."
    body = llm_server.requests[-1].body
    if provider == "anthropic":
        user_turn = body["messages"][-1]
        assert [block["type"] for block in user_turn["content"]] == [
            "tool_result",
            "tool_result",
            "text",
        ]
    else:
        assert [m["role"] for m in body["messages"]] == [
            "user",
            "assistant",
            "tool",
            "tool",
            "user",
        ]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_server_that_ignores_stream_true_still_gives_a_complete_answer(llm_server, provider):
    from tests.fakes.llm_server import Fault

    llm_server.set_script([{"text": "One piece.", "repeat": True}])
    llm_server.fail_next(Fault.ignore_stream())
    async with Gateway(config_for(llm_server, {"main": provider})) as gateway:
        texts, response = await collect(gateway, ask())
    assert texts == [] and response.content == "One piece." and response.attempts == 1
