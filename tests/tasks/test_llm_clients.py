"""The HTTP client the runner's gateways share per event loop (apps/tasks/run/llm_clients.py), over
real HTTP to the fake LLM server."""

from __future__ import annotations

import asyncio

from apps.engine.config import parse_config
from apps.engine.llm import ChatRequest, Message
from apps.engine.llm.gateway import Gateway
from apps.tasks.run.llm_clients import http_client_acquire, http_client_release
from tests.fakes.llm_server import FakeLLMServer


def _config(server: FakeLLMServer, read_timeout: float = 5.0):
    return parse_config(
        {
            "models": {"main": server.model_entry("openai", model="m")},
            "llm": {"main": "main", "timeout": {"connect": 2.0, "read": read_timeout}},
        }
    )


async def _acquire_and_release(config) -> int:
    client = http_client_acquire(config)
    await http_client_release(config, client)
    return id(client)


async def test_tasks_on_one_loop_share_one_client_and_the_last_to_leave_closes_it():
    with FakeLLMServer(script={"turns": [{"text": "Hello.", "repeat": True}]}) as server:
        config = _config(server)
        first, second = http_client_acquire(config), http_client_acquire(config)
        assert first is second
        answers = await asyncio.gather(
            *(
                Gateway(config, http_client=client).complete(
                    ChatRequest(messages=(Message("user", "hi"),))
                )
                for client in (first, second)
            )
        )
        assert [a.content for a in answers] == ["Hello.", "Hello."]
        # other timeouts, another client
        slow = _config(server, read_timeout=60.0)
        slow_client = http_client_acquire(slow)
        assert slow_client is not first
        await http_client_release(slow, first)  # not the client it holds: nothing happens
        assert not slow_client.is_closed
        await http_client_release(slow, slow_client)
        assert slow_client.is_closed

        await http_client_release(config, first)
        assert not second.is_closed  # the other task still uses it
        await http_client_release(config, second)
        assert second.is_closed
        third = http_client_acquire(config)  # a task starting later opens a new one
        assert third is not first and not third.is_closed
        await http_client_release(config, third)

        # another event loop (a thread's asyncio.run) never gets this loop's client
        other = http_client_acquire(config)
        assert await asyncio.to_thread(asyncio.run, _acquire_and_release(config)) != id(other)
        await http_client_release(config, other)
