"""A dead worker loses no task (issue 29): two real `rqworker agent` processes with the cluster's
worker class (apps/tasks/worker.py) on a real PostgreSQL and Redis, executor rq from the
environment (AGENTKIT_EXECUTOR). The worker running a plan_exec task is SIGKILLed mid-phase; the
other worker's reaper takes the task over within 30 s, with no person pressing Resume: it
resumes from the checkpoints, its `task_resumed` says why, and the task ends once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.services import private_redis
from tests.support import ROOT, manage, server_env
from tests.tasks.test_plan_exec_kill_resume import SETUP, TURNS, is_planner

pytestmark = pytest.mark.slow
ORPHAN_AFTER = 5
# After SETUP, in the same process: a task is submitted as it is made (as the API does). Made
# first and submitted only once the workers were up, a busy machine left it queued with no job
# for longer than ORPHAN_AFTER, and a worker's reaper rightly started it (one hand-over more).
SUBMIT = """
from apps.tasks.run.executors import task_submit
task_submit(task_id=Task.objects.latest("pk").pk)
"""
WORKER = [
    sys.executable,
    "manage.py",
    "rqworker",
    "agent",
    "--worker-class",
    "apps.tasks.worker.ReapingWorker",
]


def _row(db_url: str, task_id: int):
    with psycopg.connect(db_url, autocommit=True) as db:
        return db.execute(
            "select status, run_owner from tasks_task where id=%s", (task_id,)
        ).fetchone()


def test_a_task_whose_worker_was_killed_is_taken_over_by_another_worker(
    tmp_path, migrated_postgres_url
):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("a workspace\n")
    workers: list[subprocess.Popen] = []
    with private_redis(tmp_path) as redis_url, FakeLLMServer(script=TURNS) as server:
        config = tmp_path / "agentkit.yaml"
        config.write_text(
            f"""
models:
  main: {{provider: openai, model: fast-model, base_url: "{server.openai_base_url}"}}
llm: {{main: main, timeout: {{connect: 5, read: 600}}, retries: {{max_attempts: 1}}}}
spec_review: {{enabled: false}}
verification: {{modes: {{plan_exec: false}}}}
repo_map: {{enabled: false}}
evolution: {{enabled: false}}
executor: {{orphan_after_seconds: {ORPHAN_AFTER}}}
"""
        )
        env = server_env(
            tmp_path,
            AGENTKIT_CONFIG=str(config),
            DATABASE_URL=migrated_postgres_url,
            REDIS_URL=redis_url,
            AGENTKIT_EXECUTOR="rq",  # agentkit.yaml says inline: the environment decides
        )
        logs = [open(tmp_path / f"worker-{i}.log", "w") for i in range(2)]  # noqa: SIM115
        try:
            for log in logs:
                workers.append(subprocess.Popen(WORKER, cwd=ROOT, env=env, stdout=log, stderr=log))
            made = manage(env, "shell", "-c", SETUP.format(root=str(workspace)) + SUBMIT)
            assert made.returncode == 0, made.stderr
            task_id = int(made.stdout.strip().splitlines()[-1])
            deadline = time.monotonic() + 120
            while len(server.requests) < 5:  # the planner, steps 1-3, and step 4 (hanging)
                assert time.monotonic() < deadline, "step 4 never started"
                time.sleep(0.1)
            status, owner = _row(migrated_postgres_url, task_id)
            assert status == "running"
            pid = int(owner.split(":")[1])  # host:pid:token of the run's process
            victim = next(w for w in workers if w.pid == pid)  # a worker ran it, not a thread
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(timeout=10)
            killed = time.monotonic()
            while _row(migrated_postgres_url, task_id)[0] != "completed":
                assert time.monotonic() - killed < 30, "not taken over within 30 s"
                time.sleep(0.2)
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.terminate()
            for worker in workers:
                try:
                    worker.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    worker.kill()
            for log in logs:
                log.close()

        assert [is_planner(r) for r in server.requests].count(True) == 1  # no replanning
        with psycopg.connect(migrated_postgres_url, autocommit=True) as db:
            events = db.execute(
                "select seq, type, data from tasks_taskevent where task_id=%s order by seq",
                (task_id,),
            ).fetchall()
            orphaned = db.execute(
                "select orphaned from tasks_task where id=%s", (task_id,)
            ).fetchone()[0]
        assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))  # contiguous
        kinds = [kind for _, kind, _ in events]
        assert kinds.count("task_finished") == 1 and kinds[-1] == "task_finished"
        resumed = [data for _, kind, data in events if kind == "task_resumed"]
        assert len(resumed) == 1  # exactly once
        data = resumed[0] if isinstance(resumed[0], dict) else json.loads(resumed[0])
        assert data["reason"].startswith("taken over automatically"), data
        assert data["phase"] == "building"
        assert orphaned == 1
