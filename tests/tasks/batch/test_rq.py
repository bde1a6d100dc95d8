"""`run_tasks --executor rq`: the runs happen on a real RQ worker (a separate process sharing the
database and a real Redis), and the command waits for them."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

from redis import Redis
from rq import Queue

from tests.support import ROOT


def _private_db(redis_url: str, number: int = 7) -> str:
    """The test Redis, another database number: this test's queue starts and stays its own."""
    return re.sub(r"/\d+$", f"/{number}", redis_url)


def test_executor_rq_runs_the_tasks_on_workers_and_waits_for_them(batch_env, redis_url):
    url = _private_db(redis_url)
    Redis.from_url(url).flushdb()
    env = {**batch_env.env, "REDIS_URL": url}
    log = batch_env.tmp / "rq-worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "rqworker", "agent", "--worker-class",
             "rq.worker.SimpleWorker"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
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
        assert sorted(finished.get_job_ids()) == sorted(f"task-{t['task_id']}" for t in tasks)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def test_executor_rq_without_redis_url_is_refused_before_anything_runs(batch_env):
    before = batch_env.query("SELECT COUNT(*) FROM tasks_task")[0][0]
    suite = batch_env.suite("rq-none.jsonl", '{"id": "a", "mode": "direct_chat", "goal": "hi"}\n')
    done = batch_env.run_tasks(str(suite), "--executor", "rq")
    assert done.returncode == 2
    assert "--executor rq needs REDIS_URL" in done.stderr
    assert batch_env.query("SELECT COUNT(*) FROM tasks_task")[0][0] == before
