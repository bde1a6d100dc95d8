"""A react task whose process is killed mid-run does not stay `running` forever (issues 27, 29):
once its heartbeat is stale, the reaper of another process takes it over, exactly once: the new
run goes on from the stored events (the finished step is not taken again; `task_resumed` says
why) and completes, its events contiguous with one `task_finished`; a cancel of such a task ends
it at once.
Real processes, the fake LLM server, a private SQLite file."""

from __future__ import annotations

import contextlib
import json
import sqlite3

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.interrupted_runs import run_task_then_kill, wait_until_heartbeat_stale
from tests.support import manage, migrate_sqlite, server_env

pytestmark = pytest.mark.slow

# the first reap, right after the kill, must find the heartbeat fresh (a `manage.py` start alone
# took over 10 s on a busy machine)
ORPHAN_AFTER = 30
# where no reap comes before the heartbeat goes stale, the least executor.orphan_after_seconds
SHORT_ORPHAN_AFTER = 5
TURNS = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
    {"fail": "timeout"},  # the second call hangs: the process is killed here
    {"text": "The README says: a workspace."},  # the resumed run's call
]
SETUP = """
from django.contrib.auth import get_user_model
from apps.tasks.models import Task, Workspace
user = get_user_model().objects.create_user("ann", password="pw-123-secret")
ws = Workspace.objects.create(name="w", root_dir={root!r})
ws.members.add(user)
print(Task.objects.create(workspace=ws, user=user, mode="react", goal="killed").pk)
"""
REAP = (
    "import asyncio; from apps.tasks.run.reaper import reap_round; print(asyncio.run(reap_round()))"
)
# Reap, then keep the loop running until the task ends: the inline executor runs the task it
# handed over on the reaping loop, as a web process's serving loop does. Says how it ended.
REAP_AND_WAIT = """
import asyncio, time
from asgiref.sync import sync_to_async
from apps.tasks.models import Task
from apps.tasks.run.reaper import reap_round

async def main():
    print(await reap_round())
    deadline = time.monotonic() + 60
    status = sync_to_async(lambda: Task.objects.get(pk={id}).status, thread_sensitive=False)
    while await status() in ("queued", "running") and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    print(await status())

asyncio.run(main())
"""
CANCEL = """
from apps.tasks.models import Task
from apps.tasks.services import task_request_cancel
print(task_request_cancel(task=Task.objects.get(pk={id})))
"""


def start_and_kill(env, task_id: int, server: FakeLLMServer, calls: int) -> None:
    run_task_then_kill(env, task_id, lambda: len(server.requests) >= calls, "the hanging call")


def stored(db, task_id: int):
    status, error = db.execute(
        "select status, error from tasks_task where id=?", (task_id,)
    ).fetchone()
    events = db.execute(
        "select seq, type, data from tasks_taskevent where task_id=? order by seq", (task_id,)
    ).fetchall()
    return status, json.loads(error) if error else None, events


@contextlib.contextmanager
def killed_react_task(tmp_path, orphan_after: float = ORPHAN_AFTER):
    """A react task whose process was killed while its second model call hung: (env, task id)."""
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
executor: {{orphan_after_seconds: {orphan_after}}}
"""
        )
        env = server_env(tmp_path, AGENTKIT_CONFIG=str(config))
        migrate_sqlite(env)
        made = manage(env, "shell", "-c", SETUP.format(root=str(workspace)))
        assert made.returncode == 0, made.stderr
        killed = int(made.stdout.split()[-1])
        start_and_kill(env, killed, server, calls=2)
        yield env, killed, server


def test_a_killed_react_run_is_taken_over_from_its_stored_steps_once_its_heartbeat_is_stale(
    tmp_path,
):
    with killed_react_task(tmp_path) as (env, killed, server):
        db = sqlite3.connect(tmp_path / "db.sqlite3")
        assert stored(db, killed)[0] == "running"  # nobody ended it
        early = manage(env, "shell", "-c", REAP)  # its heartbeat is still fresh
        assert early.returncode == 0 and early.stdout.strip().endswith("[]"), early.stderr
        assert stored(db, killed)[0] == "running"

        wait_until_heartbeat_stale(tmp_path / "db.sqlite3", killed, ORPHAN_AFTER)
        reaped = manage(env, "shell", "-c", REAP_AND_WAIT.format(id=killed))
        assert reaped.returncode == 0, reaped.stderr
        assert f"({killed}, 'resumed'," in reaped.stdout
        assert reaped.stdout.strip().endswith("completed"), reaped.stdout

        status, _, events = stored(db, killed)
        assert status == "completed"
        assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
        kinds = [kind for _, kind, _ in events]
        assert kinds.count("task_finished") == 1 and kinds[-1] == "task_finished"
        assert kinds.count("tool_result") == 1  # step 1's read_file ran once, before the kill
        (resumed,) = [json.loads(data) for _, kind, data in events if kind == "task_resumed"]
        assert (resumed["steps"], resumed["restored_messages"]) == (1, 2)
        assert resumed["reason"].startswith("taken over automatically")
        # the resumed run's one call carried the first step: the call and its result
        last = server.requests[-1].body["messages"]
        assert [m["role"] for m in last][-3:] == ["user", "assistant", "tool"]

        again = manage(env, "shell", "-c", REAP)  # exactly once: nothing left to do
        assert again.stdout.strip().endswith("[]")
        db.close()


def test_cancel_of_a_task_whose_process_died_ends_it_at_once(tmp_path):
    with killed_react_task(tmp_path, SHORT_ORPHAN_AFTER) as (env, killed, _):
        wait_until_heartbeat_stale(tmp_path / "db.sqlite3", killed, SHORT_ORPHAN_AFTER)
        cancel = manage(env, "shell", "-c", CANCEL.format(id=killed))
        assert cancel.stdout.strip().endswith("True"), cancel.stderr
        db = sqlite3.connect(tmp_path / "db.sqlite3")
        status, _, events = stored(db, killed)
        assert status == "cancelled"
        assert [kind for _, kind, _ in events][-1] == "task_finished"
        assert json.loads(events[-1][2])["status"] == "cancelled"
        db.close()
