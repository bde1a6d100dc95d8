"""Gateway model aliases: fallback to the next alias, fallbacks=False, a named alias, and the
configuration errors (unknown alias, missing API key variable) reported before any request."""

from __future__ import annotations

import pytest

from apps.engine.llm import AuthenticationError, Gateway, LLMConfigurationError, LLMStatusError
from tests.engine.llm.conftest import ANSWER, ask, config_for, run_stream
from tests.fakes.llm_server import Fault


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
