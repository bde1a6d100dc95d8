"""A plan_exec task survives its process being killed (issue 15 acceptance): a real process runs
the task against the fake LLM server; the planner drafts the spec, the planning phase finishes
(advance_phase: checkpointed), a building step edits a file, and the next model call hangs; the
process is killed with SIGKILL mid-phase. `manage.py resume_task ID` in a new process completes
the task: the planner is not asked again, the planning phase is not redone, and the model goes on
from the conversation it had (the resumed run's first request holds the earlier steps)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.interrupted_runs import run_task_then_kill, wait_until_heartbeat_stale
from tests.support import manage, migrate_sqlite, server_env

pytestmark = pytest.mark.slow
# executor.orphan_after_seconds: the first resume, right after the kill, must see the heartbeat
# fresh, and on a busy machine starting that `manage.py` process alone took over 10 s
ORPHAN_AFTER = 30

SPEC = {
    "goal": "write out.txt",
    "summary": "Read the README, then write out.txt.",
    "phases": [
        {"id": "read", "title": "Read the README", "instructions": "Read README.md."},
        {"id": "write", "title": "Write out.txt", "depends_on": ["read"]},
    ],
    "acceptance_criteria": ["out.txt exists"],
}


def call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


# Unconditional turns answer the calls in order; the hang is used up by the call it answers.
TURNS = [
    {"text": json.dumps(SPEC)},  # the planner
    call("read_file", path="README.md"),  # step 1, planning
    call("advance_phase"),  # step 2: planning -> building (checkpoint)
    call("str_replace_editor", command="create", path="out.txt", file_text="done\n"),  # step 3
    {"fail": "timeout"},  # step 4: hangs; the worker is killed here
    call("advance_phase"),  # step 4 again, resumed: building -> verification
    {"text": "Done: out.txt holds the result."},  # step 5: the final answer
]
SETUP = """
from django.contrib.auth import get_user_model
from apps.tasks.models import Task, Workspace
user = get_user_model().objects.create_user("ann", password="pw-123-secret")
ws = Workspace.objects.create(name="w", root_dir={root!r})
ws.members.add(user)
print(Task.objects.create(workspace=ws, user=user, mode="plan_exec", goal="write out.txt").pk)
"""


def is_planner(request) -> bool:
    return not request.body.get("tools")  # the planner asks for JSON; the steps get tools


def tool_names(request) -> list[str]:
    return [
        c["function"]["name"] for m in request.body["messages"] for c in (m.get("tool_calls") or [])
    ]


def test_killed_plan_exec_worker_resumes_without_replanning_or_redoing_finished_phases(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("a workspace\n")
    with FakeLLMServer(script=TURNS) as server:
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
        env = server_env(tmp_path, AGENTKIT_CONFIG=str(config))
        migrate_sqlite(env)
        made = manage(env, "shell", "-c", SETUP.format(root=str(workspace)))
        assert made.returncode == 0, made.stderr
        task_id = int(made.stdout.strip().splitlines()[-1])

        # killed mid-run: its model call is in flight
        run_task_then_kill(env, task_id, lambda: len(server.requests) >= 5, "step 4")
        db = sqlite3.connect(tmp_path / "db.sqlite3")
        status = db.execute("select status from tasks_task where id=?", (task_id,)).fetchone()[0]
        assert status == "running"  # nobody finished it
        saved = db.execute(
            "select phase_id, status from specs_checkpoint where task_id=? order by id", (task_id,)
        ).fetchall()
        assert saved == [("spec", "completed"), ("planning", "completed")]
        assert (workspace / "out.txt").read_text() == "done\n"
        before = len(server.requests)

        refused = manage(env, "resume_task", str(task_id))  # its heartbeat is still fresh
        assert refused.returncode != 0 and "still running" in refused.stderr

        wait_until_heartbeat_stale(tmp_path / "db.sqlite3", task_id, ORPHAN_AFTER)
        resumed = manage(env, "resume_task", str(task_id))
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert f"task {task_id}: completed" in resumed.stdout

        requests = server.requests
        assert [is_planner(r) for r in requests].count(True) == 1  # no replanning
        first = requests[before]  # the resumed run's first call: the conversation goes on
        assert tool_names(first) == ["read_file", "advance_phase", "str_replace_editor"]
        assert "Confirmed spec (revision 1)" in json.dumps(first.body["messages"])
        assert len(requests) == before + 2  # steps 4 and 5 only

        events = [
            (kind, json.loads(data))
            for kind, data in db.execute(
                "select type, data from tasks_taskevent where task_id=? order by seq", (task_id,)
            )
        ]
        kinds = [k for k, _ in events]
        assert kinds.count("task_started") == 2 and kinds.count("task_finished") == 1
        resumed_event = next(d for k, d in events if k == "task_resumed")
        assert (resumed_event["phase"], resumed_event["steps"]) == ("building", 3)
        assert resumed_event["restored_messages"] == 6  # 3 assistant + 3 tool messages
        changes = [(d["previous"], d["phase"]) for k, d in events if k == "phase_changed"]
        assert changes == [("planning", "building"), ("building", "verification")]
        calls = [d["name"] for k, d in events if k == "tool_call"]
        assert calls.count("read_file") == 1  # the finished planning phase was not redone
        finished = events[-1][1]
        assert (finished["status"], finished["steps"]) == ("completed", 5)
        row = db.execute("select status, usage from tasks_task where id=?", (task_id,)).fetchone()
        assert row[0] == "completed"
        assert json.loads(row[1])["llm_calls"] == 6  # planner + steps 1-3 + steps 4-5
        saved = db.execute(
            "select phase_id from specs_checkpoint where task_id=? order by id", (task_id,)
        ).fetchall()
        assert [p for (p,) in saved] == ["spec", "planning", "building"]
        spec = db.execute("select status from specs_spec where task_id=?", (task_id,)).fetchall()
        assert spec == [("done",)]
        db.close()
