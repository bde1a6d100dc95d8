"""One HTTP client for the model calls of all the tasks running on an event loop at once.

A gateway of its own per task meant a new client (pool, transport) and a new connection to
the model's API for every task, and their closing at its end: about 2 ms of the event loop's
CPU per task, which tasks running side by side (a batch run, the chat's Daphne loop) pay one
after another. The runner takes this loop's shared client for the task's gateway instead and
gives it back when the task ends; the last task to give it back closes it, so no connection
outlives the tasks that use it and a closed loop never keeps one.

The shared client has no connection limit (each concurrent call gets a connection, as with a
client per task) and keeps up to KEEPALIVE idle ones for the next calls. Requests carry their
own headers (API keys), so sharing a client shares nothing but connections.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx

from apps.engine.config import AgentkitConfig
from apps.engine.llm.gateway import http_client

KEEPALIVE = 64


@dataclass
class _Shared:
    client: httpx.AsyncClient
    users: int = 0


_Key = tuple[asyncio.AbstractEventLoop, float, float]
_shared: dict[_Key, _Shared] = {}


def _key(config: AgentkitConfig) -> _Key:
    timeout = config.llm.timeout
    return asyncio.get_running_loop(), timeout.read, timeout.connect


def http_client_acquire(config: AgentkitConfig) -> httpx.AsyncClient:
    """This loop's client for `config`'s timeouts (opened now if no task holds one)."""
    key = _key(config)
    entry = _shared.get(key)
    if entry is None:
        client = http_client(config, max_connections=None, keepalive=KEEPALIVE)
        entry = _shared[key] = _Shared(client)
    entry.users += 1
    return entry.client


async def http_client_release(config: AgentkitConfig, client: httpx.AsyncClient) -> None:
    """Give back a client from http_client_acquire; the last user closes it."""
    key = _key(config)
    entry = _shared.get(key)
    if entry is None or entry.client is not client:  # released twice: nothing to do
        return
    entry.users -= 1
    if entry.users <= 0:
        del _shared[key]  # a task starting meanwhile opens a new one
        await client.aclose()
