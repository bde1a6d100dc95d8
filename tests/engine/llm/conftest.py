"""Fixtures for the LLM layer: one fake LLM server per session (reset for every test), configs
that point aliases at it, and a sleep that records backoff waits instead of waiting; for the
gateway tests, a server that always answers ANSWER and run_stream, which reads a stream as a UI
would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.engine.config import AgentkitConfig, parse_config
from apps.engine.llm import ChatRequest, Gateway, Message, TextBlock, ToolSpec
from tests.fakes.llm_server import FakeLLMServer

RECORDINGS = Path(__file__).parent / "recordings"
PROVIDERS = ["openai", "anthropic"]
ANSWER = "All good here, thanks for asking."


def recording(name: str) -> bytes:
    return (RECORDINGS / name).read_bytes()


class RecordedSleep:
    """Stands in for asyncio.sleep in the gateway: remembers each wait, returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture(scope="session")
def llm_server_session() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def llm_server(llm_server_session: FakeLLMServer) -> Iterator[FakeLLMServer]:
    from tests.fakes.llm_server import DEFAULT_SCRIPT

    llm_server_session.set_script(DEFAULT_SCRIPT)
    llm_server_session.ttft = 0.0
    llm_server_session.tokens_per_second = None
    llm_server_session.api_key = None
    llm_server_session.reasoning_field = "reasoning_content"
    llm_server_session.json_schema_supported = True
    llm_server_session.reset()
    yield llm_server_session
    llm_server_session.reset()


@pytest.fixture
def recorded_sleep() -> RecordedSleep:
    return RecordedSleep()


def config_for(
    server: FakeLLMServer,
    models: dict[str, str | dict[str, Any]],
    *,
    main: str | None = None,
    fallbacks: dict[str, list[str]] | None = None,
    attempts: int = 3,
    read_timeout: float = 5.0,
    max_backoff: float = 20.0,
) -> AgentkitConfig:
    """Aliases -> provider name (pointed at the fake server) or a full model mapping."""
    entries = {
        alias: server.model_entry(spec, model=f"{alias}-model") if isinstance(spec, str) else spec
        for alias, spec in models.items()
    }
    return parse_config(
        {
            "models": entries,
            "llm": {
                "main": main or next(iter(models)),
                "fallbacks": fallbacks or {},
                "timeout": {"connect": 2.0, "read": read_timeout},
                "retries": {
                    "max_attempts": attempts,
                    "initial_backoff": 0.5,
                    "max_backoff": max_backoff,
                },
            },
        }
    )


def ask(text: str = "hello", **kwargs: Any) -> ChatRequest:
    return ChatRequest(messages=(Message("user", text),), **kwargs)


TOOLS = (
    ToolSpec(
        "read_file",
        "Read a file or one symbol of it.",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "symbol": {"type": "string"}},
            "required": ["path"],
        },
    ),
    ToolSpec(
        "str_replace_editor",
        "Edit a file.",
        {"type": "object", "properties": {"command": {"type": "string"}}},
    ),
)


def long_system(words: int = 1500) -> tuple[TextBlock, ...]:
    """A stable system block long enough to be cached (> 1024 tokens), then a volatile one."""
    stable = " ".join(f"rule{i}" for i in range(words))
    return (TextBlock(stable, cache=True), TextBlock("Today is a volatile day."))


@pytest.fixture
def answering(llm_server):
    llm_server.set_script([{"text": ANSWER, "repeat": True}])
    return llm_server


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
