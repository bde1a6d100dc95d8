"""runner.run_task end to end: real workspace files, the scripted model, persisted events."""

from __future__ import annotations

import asyncio
import textwrap

import pytest
from asgiref.sync import sync_to_async

from apps.tasks.models import Task, TaskEvent
from apps.tasks.run.runner import run_task
from apps.tasks.services import task_request_cancel
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)


async def test_demo_task_reads_by_symbol_edits_and_completes(demo):
    user, workspace, root = demo
    task = await sync_to_async(make_task)(
        user, workspace, goal="fix the failing test in tests/test_slug.py"
    )
    assert await run_task(task.pk) == "completed"

    assert 'r"[^a-zA-Z0-9]+"' in (root / "textkit" / "slug.py").read_text()
    events = await sync_to_async(events_of)(task)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    kinds = [e.type for e in events]
    assert kinds[0] == "task_started" and kinds[-1] == "task_finished"
    calls = [e.data for e in events if e.type == "tool_call"]
    assert [c["name"] for c in calls] == ["read_file", "str_replace_editor"]
    assert calls[0]["arguments"] == {"path": "textkit/slug.py", "symbol": "slugify"}
    results = [e.data for e in events if e.type == "tool_result"]
    assert all(r["ok"] for r in results), results
    assert "def slugify" in results[0]["output"]
    assert "token" in kinds and "final_answer" in kinds
    assert events[0].data["workspace"] == {"id": workspace.pk, "name": "demo"}

    task = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert task.status == "completed" and task.last_seq == len(events)
    assert "[^a-zA-Z0-9]+" in task.result
    assert task.usage["input_tokens"] > 0 and task.usage["llm_calls"] == 3
    assert task.started_at and task.finished_at


async def test_a_finished_task_is_not_run_twice(demo):
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal="hello", mode="direct_chat")
    assert await run_task(task.pk) == "completed"
    count = await sync_to_async(TaskEvent.objects.filter(task=task).count)()
    assert await run_task(task.pk) == "completed"
    assert await sync_to_async(TaskEvent.objects.filter(task=task).count)() == count


async def test_missing_workspace_directory_fails_the_task_with_advice(demo, tmp_path):
    user, workspace, _ = demo
    workspace.root_dir = str(tmp_path / "gone")
    await sync_to_async(workspace.save)()
    task = await sync_to_async(make_task)(user, workspace, goal="fix it")
    assert await run_task(task.pk) == "failed"
    task = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert task.error["error_code"] == "workspace_missing"
    assert "does not exist" in task.error["message"]


async def test_cancel_requested_mid_tool_stops_the_task_promptly(demo, config_file, tmp_path):
    script = tmp_path / "slow.yaml"
    script.write_text(
        textwrap.dedent(
            """
            - text: "Running a long command."
              tool_calls: [{name: shell, arguments: {command: "sleep 30"}}]
            - "done"
            """
        )
    )
    config_file(
        f"""
        models: {{main: {{provider: scripted, script: {script}}}}}
        sandbox: {{mode: "off"}}
        """
    )
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal="run the long thing")
    runner = asyncio.create_task(run_task(task.pk))
    for _ in range(200):
        if await sync_to_async(TaskEvent.objects.filter(task=task, type="tool_call").exists)():
            break
        await asyncio.sleep(0.05)
    started = asyncio.get_running_loop().time()
    assert await sync_to_async(task_request_cancel)(task=task)
    assert await asyncio.wait_for(runner, timeout=10) == "cancelled"
    assert asyncio.get_running_loop().time() - started < 5
    events = await sync_to_async(events_of)(task)
    assert events[-1].type == "task_finished" and events[-1].data["status"] == "cancelled"


async def test_shipped_writer_skill_has_no_shell_and_its_prompt_reaches_the_model(demo):
    from apps.tasks.conf import agent_config

    config = agent_config()
    assert {"python_coder", "writer"} <= set(config.skills)
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal="hello", skill="writer")
    assert await run_task(task.pk) == "completed"
    started = (await sync_to_async(events_of)(task))[0]
    assert "shell" not in started.data["tools"] and "str_replace_editor" in started.data["tools"]
    assert started.data["skill"] == "writer"


async def test_inline_tasks_submitted_from_a_sync_thread_run_on_the_serving_loop(demo):
    """The consumer and the API submit from sync_to_async threads; the task must still run as an
    asyncio task on the serving loop, not in a private thread with its own loop."""
    import threading

    from apps.tasks.run import executors

    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal="hello", mode="direct_chat")
    serving = asyncio.get_running_loop()
    await sync_to_async(executors._start_inline)(task.pk)
    spawned = [t for t in executors._inline_tasks if t.get_name() == f"task-{task.pk}"]
    for _ in range(100):
        spawned = spawned or [
            t for t in executors._inline_tasks if t.get_name() == f"task-{task.pk}"
        ]
        if spawned:
            break
        await asyncio.sleep(0.01)
    assert spawned and spawned[0].get_loop() is serving
    assert await spawned[0] == "completed"
    assert not [t for t in threading.enumerate() if t.name == f"task-{task.pk}"]


async def test_a_run_prepared_in_the_submitting_thread_records_what_an_unprepared_one_does(demo):
    """executors.task_submit_many: a worker thread builds the engine's task (runner.prepare_run)
    of tasks sockets just created; the run then starts with it, with the same events."""
    from apps.tasks.run.runner import prepare_run

    user, workspace, _ = demo
    plain = await sync_to_async(make_task)(user, workspace, goal="hello", mode="direct_chat")
    ready = await sync_to_async(make_task)(user, workspace, goal="hello", mode="direct_chat")
    prepared = await sync_to_async(prepare_run)(ready.pk)
    assert prepared.task.pk == ready.pk and prepared.agent_task.goal == "hello"
    assert await run_task(plain.pk) == "completed"
    assert await run_task(ready.pk, prepared) == "completed"
    runs = [await sync_to_async(events_of)(t) for t in (plain, ready)]
    # How many `token` events carry the streamed text depends on the clock (they are batched
    # per streaming.flush_interval_ms): the same text, and the same events around it.
    kinds = [
        [k for i, k in enumerate(r) if not (k == "token" and i and r[i - 1] == "token")]
        for r in ([e.type for e in run] for run in runs)
    ]
    assert kinds[0] == kinds[1] and kinds[1][0] == "task_started"
    texts = ["".join(e.data["text"] for e in run if e.type == "token") for run in runs]
    assert texts[0] == texts[1] and texts[0]


async def test_a_failure_while_preparing_is_reported_by_the_run(demo):
    from apps.tasks.run.runner import prepare_run

    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal="hello", mode="no_such_mode")
    prepared = await sync_to_async(prepare_run)(task.pk)
    assert prepared.failure is not None and prepared.agent_task is None
    assert await run_task(task.pk, prepared) == "failed"
    events = await sync_to_async(events_of)(task)
    assert [e.type for e in events] == ["task_started", "error", "task_finished"]
    assert events[1].data["error_struct"]["error_code"] == "mode_not_available"
    assert await sync_to_async(prepare_run)(task.pk) is None  # finished: nothing to prepare
