"""A react task whose process is killed mid-run does not stay `running` forever (issue 27): once
its heartbeat is stale, the reaper of another process ends it `failed` (interrupted) with an
`error` and one `task_finished` after its stored events, exactly once; a cancel of such a task
ends it at once.
Real processes, the fake LLM server, a private SQLite file."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.support import ROOT, manage, server_env

pytestmark = pytest.mark.slow

ORPHAN_AFTER = 8  # the first reap, right after the kill, must find the heartbeat fresh
TURNS = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
    {"fail": "timeout"},  # the second call hangs: the process is killed here
]
SETUP = """
from django.contrib.auth import get_user_model
from apps.tasks.models import Task, Workspace
user = get_user_model().objects.create_user("ann", password="pw-123-secret")
ws = Workspace.objects.create(name="w", root_dir={root!r})
ws.members.add(user)
for goal in ("killed", "cancelled"):
    print(Task.objects.create(workspace=ws, user=user, mode="react", goal=goal).pk)
"""
RUN = "import asyncio; from apps.tasks.runner import run_task; print(asyncio.run(run_task({id})))"
REAP = "import asyncio; from apps.tasks.reaper import reap_round; print(asyncio.run(reap_round()))"
CANCEL = """
from apps.tasks.models import Task
from apps.tasks.services import task_request_cancel
print(task_request_cancel(task=Task.objects.get(pk={id})))
"""


def start_and_kill(env, task_id: int, server: FakeLLMServer, calls: int) -> None:
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", RUN.format(id=task_id)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while len(server.requests) < calls:  # its hanging call is in flight
            assert worker.poll() is None, "the worker ended before its hanging call"
            assert time.monotonic() < deadline, "the hanging call never came"
            time.sleep(0.1)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()


def stored(db, task_id: int):
    status, error = db.execute(
        "select status, error from tasks_task where id=?", (task_id,)
    ).fetchone()
    events = db.execute(
        "select seq, type, data from tasks_taskevent where task_id=? order by seq", (task_id,)
    ).fetchall()
    return status, json.loads(error) if error else None, events


def test_a_killed_react_run_is_ended_by_the_reaper_once_its_heartbeat_is_stale(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("a workspace\n")
    with FakeLLMServer(script=TURNS + TURNS) as server:
        config = tmp_path / "agentkit.yaml"
        config.write_text(
            f"""
models:
  main: {{provider: openai, model: m, base_url: "{server.openai_base_url}"}}
llm: {{main: main, timeout: {{connect: 5, read: 600}}, retries: {{max_attempts: 1}}}}
repo_map: {{enabled: false}}
evolution: {{enabled: false}}
executor: {{orphan_after_seconds: {ORPHAN_AFTER}}}
"""
        )
        env = server_env(tmp_path, AGENTKIT_CONFIG=str(config))
        assert manage(env, "migrate", "-v", "0").returncode == 0
        made = manage(env, "shell", "-c", SETUP.format(root=str(workspace)))
        assert made.returncode == 0, made.stderr
        killed = int(made.stdout.split()[-2])
        start_and_kill(env, killed, server, calls=2)

        db = sqlite3.connect(tmp_path / "db.sqlite3")
        assert stored(db, killed)[0] == "running"  # nobody ended it
        early = manage(env, "shell", "-c", REAP)  # its heartbeat is still fresh
        assert early.returncode == 0 and early.stdout.strip().endswith("[]"), early.stderr
        assert stored(db, killed)[0] == "running"

        time.sleep(ORPHAN_AFTER + 1)  # the dead run's heartbeat goes stale
        reaped = manage(env, "shell", "-c", REAP)
        assert reaped.returncode == 0, reaped.stderr
        assert f"({killed}, 'interrupted'," in reaped.stdout

        status, error, events = stored(db, killed)
        assert status == "failed" and error["error_code"] == "interrupted"
        assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
        kinds = [kind for _, kind, _ in events]
        assert kinds[0] == "task_started" and "tool_result" in kinds
        assert kinds[-2:] == ["error", "task_finished"] and kinds.count("task_finished") == 1
        assert json.loads(events[-1][2])["status"] == "failed"

        again = manage(env, "shell", "-c", REAP)  # exactly once: nothing left to do
        assert again.stdout.strip().endswith("[]")
        db.close()


def test_cancel_of_a_task_whose_process_died_ends_it_at_once(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("a workspace\n")
    with FakeLLMServer(script=TURNS) as server:
        config = tmp_path / "agentkit.yaml"
        config.write_text(
            f"""
models:
  main: {{provider: openai, model: m, base_url: "{server.openai_base_url}"}}
llm: {{main: main, timeout: {{connect: 5, read: 600}}, retries: {{max_attempts: 1}}}}
repo_map: {{enabled: false}}
evolution: {{enabled: false}}
executor: {{orphan_after_seconds: {ORPHAN_AFTER}}}
"""
        )
        env = server_env(tmp_path, AGENTKIT_CONFIG=str(config))
        assert manage(env, "migrate", "-v", "0").returncode == 0
        made = manage(env, "shell", "-c", SETUP.format(root=str(workspace)))
        killed = int(made.stdout.split()[-2])
        start_and_kill(env, killed, server, calls=2)
        time.sleep(ORPHAN_AFTER + 1)
        cancel = manage(env, "shell", "-c", CANCEL.format(id=killed))
        assert cancel.stdout.strip().endswith("True"), cancel.stderr
        db = sqlite3.connect(tmp_path / "db.sqlite3")
        status, _, events = stored(db, killed)
        assert status == "cancelled"
        assert [kind for _, kind, _ in events][-1] == "task_finished"
        assert json.loads(events[-1][2])["status"] == "cancelled"
        db.close()
