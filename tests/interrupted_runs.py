"""Runs that die on purpose, for tests of resume and take-over: a task's run killed in its own
process mid-run, the wait until its heartbeat is stale, and a plan_exec task left interrupted
after its planning phase (a `manage.py shell` script)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support import ROOT

RUN_TASK = (
    "import asyncio; from apps.tasks.run.runner import run_task; print(asyncio.run(run_task({id})))"
)


def run_task_then_kill(env: dict[str, str], task_id: int, until, what: str) -> None:
    """Run the task in a process of its own (`manage.py shell`), wait until `until()` is true
    (its model call hanging, say), then SIGKILL the process: a worker dying mid-run."""
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", RUN_TASK.format(id=task_id)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not until():
            assert worker.poll() is None, f"the worker ended before {what}"
            assert time.monotonic() < deadline, f"{what} never came"
            time.sleep(0.1)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()


def wait_until_heartbeat_stale(db_path: Path, task_id: int, orphan_after: float) -> None:
    """Until the dead run's last heartbeat (`heartbeat_at` in the SQLite file) is older than
    `orphan_after` seconds, with a second to spare: from then on the task has no live run
    (apps/tasks/dispatch/liveness.py). Waits for that moment instead of a fixed sleep after whatever the
    test did since the kill."""
    import sqlite3
    from datetime import UTC, datetime, timedelta

    with contextlib.closing(sqlite3.connect(db_path)) as db:
        (beat,) = db.execute(
            "select heartbeat_at from tasks_task where id=?", (task_id,)
        ).fetchone()
    assert beat, f"task {task_id} never had a heartbeat: no run claimed it"
    last = datetime.fromisoformat(beat).replace(tzinfo=UTC)
    stale_at = last + timedelta(seconds=orphan_after + 1)
    wait = (stale_at - datetime.now(UTC)).total_seconds()
    assert wait < orphan_after + 5, f"task {task_id}'s heartbeat {beat} is in the future"
    if wait > 0:
        time.sleep(wait)


# A plan_exec task whose process died after its planning phase (step 1: read slugify, advance to
# building), its spec executing and its heartbeat stale: what a restarted server finds. A
# `manage.py shell -c` script (format it with user=USERNAME) on a bootstrapped demo; prints the id.
INTERRUPTED_PLAN_TASK = """
import json
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from apps.engine.plan.phases import PhaseTracker
from apps.engine.plan.gate import gate_call
from apps.engine.llm.types import ToolCall
from apps.specs.models import Spec
from apps.tasks.conf import agent_config
from apps.tasks.models import Task, TaskEvent, Workspace
user = get_user_model().objects.get(username={user!r})
ws = Workspace.objects.get(name="demo")
goal = "fix the failing test in tests/test_slug.py"
draft = {{"goal": goal, "phases": [{{"id": "fix", "title": "Fix slugify"}}],
          "verification_commands": []}}
task = Task.objects.create(workspace=ws, user=user, mode="plan_exec", goal=goal,
                           status="running", started_at=timezone.now())
Spec.objects.create(task=task, workspace=ws, goal=goal, draft=draft, status="executing")
tracker = PhaseTracker.for_run(agent_config().plan_exec)
tracker.begin_step(1)
advance = ToolCall("c2", "advance_phase", {{"summary": "read it"}})
result, changed = gate_call(tracker, advance, None)
usage = {{"input_tokens": 900, "output_tokens": 40, "cache_read_tokens": 0,
          "cache_write_tokens": 0, "llm_calls": 2}}
rows = [
    ("task_started", {{"mode": "plan_exec", "goal": goal}}),
    ("token", {{"step": 1, "text": "Planning: reading slugify first."}}),
    ("tool_call", {{"step": 1, "call_id": "c1", "name": "read_file",
                    "arguments": {{"path": "textkit/slug.py", "symbol": "slugify"}},
                    "usage": usage, "cost": 0.0}}),
    ("tool_result", {{"step": 1, "call_id": "c1", "name": "read_file", "ok": True,
                      "output": "def slugify(text, separator='-'): ..."}}),
    ("tool_call", {{"step": 1, "call_id": "c2", "name": "advance_phase",
                    "arguments": advance.arguments}}),
    *changed,
    ("tool_result", {{"step": 1, "call_id": "c2", "name": "advance_phase", "ok": True,
                      "output": result.output}}),
]
for seq, (kind, data) in enumerate(rows, 1):
    TaskEvent.objects.create(task=task, seq=seq, type=kind, data=data, ts=timezone.now())
Task.objects.filter(pk=task.pk).update(last_seq=len(rows))
# No run ever claimed it (no heartbeat): interrupted, so resumable (apps/tasks/dispatch/liveness.py).
print(task.pk)
"""
