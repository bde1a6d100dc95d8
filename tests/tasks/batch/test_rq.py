"""`run_tasks --executor rq`: the runs happen on a real RQ worker (a separate process sharing the
database and a real Redis), and the command waits for them."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time

import pytest
from redis import Redis
from rq import Queue

from tests.support import ROOT

pytestmark = pytest.mark.slow  # spawns processes: started early (tests/conftest.py)


def _private_db(redis_url: str, number: int = 7) -> str:
    """The test Redis, another database number: this test's queue starts and stays its own."""
    return re.sub(r"/\d+$", f"/{number}", redis_url)


@contextlib.contextmanager
def rq_worker(batch_env, redis_url: str, number: int):
    """One real worker (its own process) on queue `agent` of a private Redis database."""
    url = _private_db(redis_url, number)
    Redis.from_url(url).flushdb()
    env = {**batch_env.env, "REDIS_URL": url}
    log = batch_env.tmp / f"rq-worker-{number}.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "rqworker", "agent", "--worker-class",
             "rq.worker.SimpleWorker"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield url, env, log
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def test_executor_rq_runs_the_tasks_on_workers_and_waits_for_them(batch_env, redis_url):
    with rq_worker(batch_env, redis_url, 7) as (url, env, log):
        suite = batch_env.suite(
            "rq.jsonl",
            "".join(
                f'{{"id": "r{i}", "mode": "direct_chat", "goal": "hi", '
                f'"expect": {{"status": "completed"}}}}\n'
                for i in range(3)
            ),
        )
        report = batch_env.tmp / "rq.json"
        done = subprocess.run(
            [sys.executable, "manage.py", "run_tasks", str(suite), "--executor", "rq",
             "--concurrency", "2", "--report", str(report)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr + log.read_text()
        assert "executor rq" in done.stdout
        tasks = json.loads(report.read_text())["tasks"]
        assert [t["status"] for t in tasks] == ["completed"] * 3
        finished = Queue("agent", connection=Redis.from_url(url)).finished_job_registry
        assert sorted(finished.get_job_ids()) == sorted(f"task-{t['task_id']}-1" for t in tasks)


def test_ctrl_c_with_executor_rq_cancels_the_running_and_the_waiting_jobs(batch_env, redis_url):
    with rq_worker(batch_env, redis_url, 8) as (_url, env, log):
        suite = batch_env.suite(
            "rq-slow.yaml",
            """
            - {id: slow-1, mode: direct_chat, model: slow, goal: talk}
            - {id: slow-2, mode: direct_chat, model: slow, goal: talk}
            """,
        )
        report = batch_env.tmp / "rq-slow.json"
        process = subprocess.Popen(
            [sys.executable, "manage.py", "run_tasks", str(suite), "--executor", "rq",
             "--concurrency", "2", "--report", str(report)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            # One worker: one job runs (its task streams), the other waits in the queue.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                running = batch_env.query(
                    "SELECT COUNT(*) FROM tasks_task t JOIN tasks_taskevent e ON e.task_id = t.id "
                    "WHERE t.model = 'slow' AND t.status = 'running' AND e.type = 'token'"
                )[0][0]
                if running:
                    break
                time.sleep(0.2)
            assert running, log.read_text()
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, out + err
        tasks = json.loads(report.read_text())["tasks"]
        assert [t["status"] for t in tasks] == ["cancelled", "cancelled"], tasks
        ids = [t["task_id"] for t in tasks]
        rows = batch_env.query("SELECT status FROM tasks_task WHERE id IN (?, ?)", *ids)
        assert rows == [("cancelled",), ("cancelled",)]
        for task_id in ids:  # the waiting one too: its sockets and the API see it end
            events = batch_env.query(
                "SELECT seq, type FROM tasks_taskevent WHERE task_id = ? ORDER BY seq", task_id
            )
            kinds = [kind for _, kind in events]
            assert [seq for seq, _ in events] == list(range(1, len(events) + 1)), events
            assert kinds.count("task_finished") == 1 and kinds[-1] == "task_finished", events


def test_executor_rq_without_redis_url_is_refused_before_anything_runs(batch_env):
    before = batch_env.query("SELECT COUNT(*) FROM tasks_task")[0][0]
    suite = batch_env.suite("rq-none.jsonl", '{"id": "a", "mode": "direct_chat", "goal": "hi"}\n')
    done = batch_env.run_tasks(str(suite), "--executor", "rq")
    assert done.returncode == 2
    assert "--executor rq needs REDIS_URL" in done.stderr
    assert batch_env.query("SELECT COUNT(*) FROM tasks_task")[0][0] == before
