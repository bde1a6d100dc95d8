"""API keys never appear in errors, reprs, logs or streamed output, even when the service
echoes them back."""

from __future__ import annotations

import logging
import pickle
import traceback

import pytest

from apps.engine.llm import AuthenticationError, Gateway, LLMError
from tests.engine.llm.conftest import ask, config_for
from tests.fakes.llm_server import Fault

KEY = "sk-live-0123456789abcdefSECRET"


@pytest.fixture
def keyed(llm_server, monkeypatch):
    monkeypatch.setenv("AGENTKIT_TEST_KEY", KEY)
    llm_server.api_key = KEY  # the fake service refuses requests without the right key
    return llm_server


def config(server, provider: str, **kwargs):
    entry = server.model_entry(provider, api_key_env="AGENTKIT_TEST_KEY")
    return config_for(server, {"main": entry}, **kwargs)


def everything_about(error: BaseException) -> str:
    return "\n".join(
        [
            str(error),
            repr(error),
            repr(error.args),
            repr(getattr(error, "body", None)),
            "".join(traceback.format_exception(error)),
        ]
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_key_echoed_in_a_401_body_is_redacted_from_the_error(keyed, provider, caplog):
    keyed.fail_next(Fault.auth_echo())
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log requests at DEBUG
    async with Gateway(config(keyed, provider)) as gateway:
        with pytest.raises(AuthenticationError) as info:
            await gateway.complete(ask())
    assert keyed.requests[0].headers  # the key did travel, in a header
    text = everything_about(info.value)
    assert "Incorrect API key provided: [redacted]" in text
    assert KEY not in text
    assert KEY not in repr(pickle.loads(pickle.dumps(info.value)))
    assert caplog.records and KEY not in caplog.text


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_key_in_retried_errors_and_their_warnings_is_redacted(
    keyed, provider, caplog, recorded_sleep
):
    leaky = f"upstream rejected key {KEY}"
    keyed.fail_next(Fault.http_error(500, leaky), Fault.error_event(message=leaky))
    caplog.set_level(logging.DEBUG)
    async with Gateway(config(keyed, provider), sleep=recorded_sleep) as gateway:
        deltas = [delta async for delta in gateway.stream(ask())]
        assert KEY not in repr(gateway) and KEY not in repr(gateway.provider("main"))
    assert "retrying" in caplog.text
    assert "upstream rejected key [redacted]" in caplog.text
    assert KEY not in caplog.text
    assert KEY not in repr(deltas)
    assert deltas[-1].response.attempts == 3


async def test_key_is_redacted_when_every_attempt_fails(keyed, caplog, recorded_sleep):
    keyed.fail_next(*[Fault.http_error(503, f"bad {KEY}")] * 2)
    async with Gateway(config(keyed, "openai", attempts=2), sleep=recorded_sleep) as gateway:
        with pytest.raises(LLMError) as info:
            await gateway.complete(ask())
    assert KEY not in everything_about(info.value)
    assert KEY not in caplog.text
