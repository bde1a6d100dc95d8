"""A team_collab task survives its process being killed (issue 15 acceptance): a real process
runs the task against the fake LLM server; phase 1 finishes (checkpointed), phase 2's model call
hangs; the process is killed with SIGKILL mid-phase; `manage.py resume_task ID` in a new process
completes the task, and phase 1's expert is never asked again."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.fakes.llm_server import FakeLLMServer, Fault
from tests.interrupted_runs import run_task_then_kill, wait_until_heartbeat_stale
from tests.support import manage, migrate_sqlite, server_env

pytestmark = pytest.mark.slow
ORPHAN_AFTER = 5  # executor.orphan_after_seconds: the dead run's heartbeat is stale after this
REAP = """
import asyncio
from apps.tasks.models import Task
from apps.tasks.run.reaper import reap_round

async def main():
    done = await reap_round()  # the resumed run starts on this loop (the inline executor)
    for _ in range(1200):
        task = await Task.objects.aget(pk={id})
        if task.is_finished:
            break
        await asyncio.sleep(0.1)
    print(done, task.status)

asyncio.run(main())
"""

TURNS = [
    {"match": "Your phase, as the planner: plan ", "repeat": True, "text": "Plan: write it."},
    {"match": "Your phase, as the coder: build ", "repeat": True, "text": "Built it."},
    {"match": "Your phase, as the reviewer: review ", "repeat": True, "text": "Looks right."},
]
SPEC = {
    "goal": "ship it",
    "phases": [
        {"id": "plan", "title": "Plan", "role": "planner"},
        {"id": "build", "title": "Build", "role": "coder", "depends_on": ["plan"]},
        {"id": "review", "title": "Review", "role": "reviewer", "depends_on": ["build"]},
    ],
}
SETUP = """
from django.contrib.auth import get_user_model
from apps.specs.models import Spec, SpecPhase
from apps.tasks.models import Task, Workspace
import json, sys
user = get_user_model().objects.create_user("ann", password="pw-123-secret")
ws = Workspace.objects.create(name="w", root_dir={root!r})
ws.members.add(user)
task = Task.objects.create(workspace=ws, user=user, mode="team_collab", goal="ship it")
draft = json.loads({spec!r})
spec = Spec.objects.create(task=task, workspace=ws, goal="ship it", draft=draft, status="confirmed")
for i, p in enumerate(draft["phases"]):
    SpecPhase.objects.create(spec=spec, position=i, phase_id=p["id"], title=p["title"], role=p["role"])
print(task.pk)
"""


def phase_of(request) -> str:
    for message in request.body["messages"]:
        if message["role"] == "user" and "Your phase, as the " in str(message["content"]):
            text = str(message["content"])
            return text.split("Your phase, as the ", 1)[1].split(":", 1)[0]
    return "?"


def test_killed_worker_mid_phase_resumes_without_redoing_finished_phases(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("a workspace\n")
    with FakeLLMServer(script=TURNS) as server:
        server.fail_next(Fault.hang(seconds=300, model="slow-model"))  # phase 2's first call
        config = tmp_path / "agentkit.yaml"
        config.write_text(
            f"""
models:
  main: {{provider: openai, model: fast-model, base_url: "{server.openai_base_url}"}}
  slow: {{provider: openai, model: slow-model, base_url: "{server.openai_base_url}"}}
llm: {{main: main, timeout: {{connect: 5, read: 600}}, retries: {{max_attempts: 1}}}}
experts:
  coder: {{model: slow, start_phase: building, system_prompt: "You build."}}
verification: {{modes: {{team_collab: false}}}}
evolution: {{enabled: false}}
executor: {{orphan_after_seconds: {ORPHAN_AFTER}}}
"""
        )
        env = server_env(tmp_path, AGENTKIT_CONFIG=str(config))
        migrate_sqlite(env)
        made = manage(env, "shell", "-c", SETUP.format(root=str(workspace), spec=json.dumps(SPEC)))
        assert made.returncode == 0, made.stderr
        task_id = int(made.stdout.strip().splitlines()[-1])

        # killed mid-run: its model call is in flight
        run_task_then_kill(
            env, task_id, lambda: any(r.model == "slow-model" for r in server.requests), "phase 2"
        )
        db = sqlite3.connect(tmp_path / "db.sqlite3")
        status = db.execute("select status from tasks_task where id=?", (task_id,)).fetchone()[0]
        assert status == "running"  # nobody finished it
        saved = db.execute(
            "select phase_id, status from specs_checkpoint where task_id=?", (task_id,)
        ).fetchall()
        assert saved == [("plan", "completed")]
        asked_before = [phase_of(r) for r in server.requests]
        assert asked_before == ["planner", "coder"]

        wait_until_heartbeat_stale(tmp_path / "db.sqlite3", task_id, ORPHAN_AFTER)
        # Nobody resumes it by hand: a process that runs tasks reaps it (apps/tasks/run/reaper.py).
        reaped = manage(env, "shell", "-c", REAP.format(id=task_id))
        assert reaped.returncode == 0, reaped.stdout + reaped.stderr
        assert f"[({task_id}, 'resumed', None)] completed" in reaped.stdout

        asked = [phase_of(r) for r in server.requests]
        assert asked.count("planner") == 1  # phase 1 was not run again
        assert asked == ["planner", "coder", "coder", "reviewer"]
        row = db.execute("select status, usage from tasks_task where id=?", (task_id,)).fetchone()
        assert row[0] == "completed"
        assert json.loads(row[1])["llm_calls"] == 3  # plan's (checkpoint) + build + review
        saved = db.execute(
            "select phase_id from specs_checkpoint where task_id=? order by id", (task_id,)
        ).fetchall()
        assert [p for (p,) in saved] == ["plan", "build", "review"]
        kinds = [
            k
            for (k,) in db.execute(
                "select type from tasks_taskevent where task_id=? order by seq", (task_id,)
            )
        ]
        assert kinds.count("task_started") == 2  # the killed run's and the resumed run's
        assert kinds.count("task_finished") == 1
        db.close()
