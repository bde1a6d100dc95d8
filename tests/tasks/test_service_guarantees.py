"""Issue 27's guarantees as a user meets them, through a real Daphne server (SQLite, in-memory
channel layer): two tasks sent at once to one workspace — by the JSON API and by two sockets —
never overlap in time and the second says whom it waits for, while a direct_chat task is not held
back; a model whose answer holds a lone surrogate and NUL still ends its task, through the API."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import httpx
import pytest

from tests.fakes.llm_server import FakeLLMServer, Fault
from tests.load_driver import login_cookie, one_socket
from tests.support import agentkit_server

pytestmark = pytest.mark.slow

SLOW_SCRIPT = """
- text: "working"
  tool_calls: [{name: shell, arguments: {command: "sleep 1.5"}}]
- "done"
"""
FINAL = {"completed", "failed", "cancelled", "gave_up_after_reflections"}


def api_client(server) -> httpx.Client:
    token = server.manage("create_api_token", server.username).stdout.strip().splitlines()[-1]
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def wait_ended(client: httpx.Client, task_id: int, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        task = client.get(f"/api/tasks/{task_id}").json()
        if task["status"] in FINAL:
            return task
        assert time.monotonic() < deadline, f"task {task_id} did not end: {task['status']}"
        time.sleep(0.2)


def events(client: httpx.Client, task_id: int) -> list[dict]:
    listed = client.get(f"/api/tasks/{task_id}/events?after=0").json()["events"]
    assert [e["seq"] for e in listed] == list(range(1, len(listed) + 1))
    assert [e["type"] for e in listed].count("task_finished") == 1
    assert listed[-1]["type"] == "task_finished"
    return listed


def at(event: dict) -> datetime:
    return datetime.fromisoformat(event["ts"])


def assert_one_after_the_other(client: httpx.Client, ids: list[int]) -> None:
    """The two runs did not overlap; the one that ran second said whom it waited for."""
    runs = {task_id: events(client, task_id) for task_id in ids}
    start = {
        task_id: at(next(e for e in run if e["type"] == "task_started"))
        for task_id, run in runs.items()
    }
    first, second = sorted(ids, key=start.get)
    assert at(runs[first][-1]) <= start[second]
    waiting = [e["data"] for e in runs[second] if e["type"] == "task_waiting"]
    assert waiting and waiting[0]["waiting_for"] == first
    assert waiting[0]["reason"] == f"waiting for task #{first} on this workspace"
    assert not [e for e in runs[first] if e["type"] == "task_waiting"]


def test_tasks_sent_at_once_to_one_workspace_run_one_after_the_other(tmp_path):
    script = tmp_path / "slow.yaml"
    script.write_text(SLOW_SCRIPT)
    config = tmp_path / "agentkit.yaml"
    config.write_text(
        f"models: {{main: {{provider: scripted, script: {script}}}}}\nrepo_map: {{enabled: false}}\n"
    )
    with (
        agentkit_server(tmp_path, AGENTKIT_CONFIG=str(config)) as server,
        api_client(server) as client,
    ):
        sent = [
            client.post("/api/tasks", json={"workspace": "demo", "text": f"change {n}"})
            for n in (1, 2)
        ]
        assert [r.status_code for r in sent] == [201, 201], [r.text for r in sent]
        ids = [r.json()["id"] for r in sent]
        chat = client.post(
            "/api/tasks", json={"workspace": "demo", "text": "hello", "mode": "direct_chat"}
        ).json()["id"]
        assert wait_ended(client, chat, 30)["status"] == "completed"
        assert [wait_ended(client, i)["status"] for i in ids] == ["completed", "completed"]
        assert_one_after_the_other(client, ids)
        chat_end = at(events(client, chat)[-1])  # direct_chat was not held back
        assert chat_end < min(at(events(client, i)[-1]) for i in ids)

        cookie = login_cookie(server.url, server.username, server.password)
        ws_url = server.url.replace("http://", "ws://") + "/ws/chat/"
        sockets = asyncio.run(_two_sockets(ws_url, cookie, server.url))
        assert [s.error for s in sockets] == [None, None]
        assert [s.status for s in sockets] == ["completed", "completed"]
        for run in sockets:  # each socket saw its whole task, in order
            assert run.seqs == list(range(1, len(run.seqs) + 1))
        assert_one_after_the_other(client, [s.task_id for s in sockets])


async def _two_sockets(ws_url: str, cookie: str, origin: str):
    return await asyncio.gather(*(one_socket(ws_url, cookie, origin, i, 90) for i in range(2)))


def test_a_model_answer_with_a_lone_surrogate_and_nul_ends_its_task_over_the_api(tmp_path):
    with FakeLLMServer(script=["The answer."]) as llm:
        llm.fail_next(Fault.shaped(["cut \ud83d", " and \ud800 and \x00 nul", " end"]))
        config = tmp_path / "agentkit.yaml"
        config.write_text(
            "models: {main: {provider: openai, model: fake, "
            f'base_url: "{llm.openai_base_url}"}}}}\n'
            "llm: {retries: {max_attempts: 1}}\nrepo_map: {enabled: false}\n"
        )
        with (
            agentkit_server(tmp_path, AGENTKIT_CONFIG=str(config)) as server,
            api_client(server) as client,
        ):
            sent = client.post(
                "/api/tasks", json={"workspace": "demo", "text": "say it", "mode": "react"}
            )
            task = wait_ended(client, sent.json()["id"])
            listed = events(client, task["id"])
    assert task["status"] == "completed"
    assert task["result"] == "cut \ufffd and \ufffd and \ufffd nul end"
    assert listed[-1]["data"]["status"] == "completed"
