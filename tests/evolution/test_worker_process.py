"""Seed 000 AE3 end to end: a real server (Daphne), a real Redis and a separate `rqworker
evolution` process. A task sent through the JSON API gives up after its reflections; the worker
process learns from it, which `manage.py evolve --task ID` then reports."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.evolution.conftest import GOAL, gives_up_config
from tests.support import agentkit_server

pytestmark = pytest.mark.slow


def test_the_worker_process_learns_from_a_task_that_gave_up(tmp_path, redis_url):
    config = tmp_path / "agentkit.yaml"
    config.write_text(gives_up_config())
    with agentkit_server(
        tmp_path,
        worker=True,
        queues=("evolution",),
        AGENTKIT_CONFIG=str(config),
        REDIS_URL=redis_url,
    ) as server:
        token = server.manage("create_api_token", server.username).stdout.strip().splitlines()[-1]
        headers = {"Authorization": f"Bearer {token}"}
        created = httpx.post(
            f"{server.url}/api/tasks",
            json={"workspace": "demo", "text": GOAL, "mode": "plan_exec"},
            headers=headers,
            timeout=10,
        )
        assert created.status_code == 201, created.text
        task_id = created.json()["id"]
        deadline = time.monotonic() + 120
        while True:
            status = httpx.get(f"{server.url}/api/tasks/{task_id}", headers=headers).json()
            if status["status"] not in ("queued", "running"):
                break
            assert time.monotonic() < deadline, "the task did not finish"
            time.sleep(0.2)
        assert status["status"] == "gave_up_after_reflections"

        worker_log = tmp_path / "worker.log"
        while f"Job OK (evolve-task-{task_id})" not in worker_log.read_text():
            assert time.monotonic() < deadline, worker_log.read_text()[-2000:]
            time.sleep(0.2)
        # the worker process did the learning: the command finds it done
        printed = server.manage("evolve", "--task", str(task_id)).stdout
        assert "already learned from" in printed
        assert "lesson [give_up] verification failed: " in printed
