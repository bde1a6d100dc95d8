"""50 concurrent sockets through scripted tasks against a real Daphne + Redis channel layer:
every event of every task is delivered exactly once, in order (figures: bench/chat_load.py)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.load_driver import drive, login_cookie, problems, write_load_config
from tests.support import agentkit_server

pytestmark = pytest.mark.slow
SOCKETS = 50


def stored_seqs(server, task_ids, cookie) -> dict[int, list[int]]:
    seqs = {}
    with httpx.Client(base_url=server.url, headers={"Cookie": cookie}, timeout=30) as client:
        for task_id in task_ids:
            events = client.get(f"/api/tasks/{task_id}/events?after=0").json()["events"]
            seqs[task_id] = [e["seq"] for e in events]
    return seqs


def test_fifty_sockets_each_get_every_event_once_in_order(tmp_path, redis_url):
    config = write_load_config(tmp_path)
    with agentkit_server(tmp_path, AGENTKIT_CONFIG=str(config), REDIS_URL=redis_url) as server:
        cookie = login_cookie(server.url, server.username, server.password)
        runs = asyncio.run(drive(server.url, cookie, SOCKETS))
        stored = stored_seqs(server, [r.task_id for r in runs if r.task_id], cookie)
    assert problems(runs, stored) == []
    assert all(r.types.count("tool_call") == 1 and r.types.count("token") >= 10 for r in runs)
