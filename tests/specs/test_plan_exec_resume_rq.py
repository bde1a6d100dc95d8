"""Resume through the RQ executor: a plan_exec task whose process died after its planning phase
is resumed with `POST /api/tasks/<id>/resume` on a Daphne process whose executor is `rq`; a real
RQ worker runs the continuation, which goes on in building (planning not redone) and completes."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.interrupted_runs import INTERRUPTED_PLAN_TASK
from tests.specs.test_cross_process import cross_process_config
from tests.support import agentkit_server

pytestmark = pytest.mark.slow


def test_an_interrupted_plan_task_resumed_over_the_api_runs_on_the_rq_worker(tmp_path, redis_url):
    config = cross_process_config(tmp_path)  # the shipped config with executor.kind: rq
    with agentkit_server(tmp_path, worker=True, AGENTKIT_CONFIG=config, REDIS_URL=redis_url) as s:
        made = s.manage("shell", "-c", INTERRUPTED_PLAN_TASK.format(user=s.username))
        task_id = int(made.stdout.strip().splitlines()[-1])
        token = s.manage("create_api_token", s.username).stdout.strip().splitlines()[-1]
        api = httpx.Client(base_url=s.url, headers={"Authorization": f"Bearer {token}"})
        assert api.get(f"/api/tasks/{task_id}").json()["resumable"] is True
        response = api.post(f"/api/tasks/{task_id}/resume")
        assert response.status_code == 202, response.text
        deadline = time.monotonic() + 120
        while (status := api.get(f"/api/tasks/{task_id}").json()["status"]) in (
            "running",
            "queued",
        ):
            assert time.monotonic() < deadline, "the resumed task did not finish"
            time.sleep(0.3)
        events = api.get(f"/api/tasks/{task_id}/events?after=0").json()["events"]
        worker_log = (tmp_path / "worker.log").read_text()

    assert status == "completed"
    assert f"task-{task_id}" in worker_log, "the resumed task did not run on the RQ worker"
    kinds = [e["type"] for e in events]
    assert kinds.count("task_started") == 2 and kinds.count("task_resumed") == 1
    resumed = next(e["data"] for e in events if e["type"] == "task_resumed")
    assert (resumed["phase"], resumed["steps"]) == ("building", 1)
    reads = [e for e in events if e["type"] == "tool_call" and e["data"]["name"] == "read_file"]
    assert len(reads) == 1  # the finished planning phase was not redone
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
