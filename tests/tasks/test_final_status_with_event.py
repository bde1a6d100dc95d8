"""The end of a task commits with its `task_finished` row (apps/tasks/events/event_writer.py): a socket
told of the end finds the task ended and a poller that sees it ended finds the event; the
lifecycle hook (lifecycle.finish_task) then adds the failure's salvage and own text over the same final
status, and a task already ended otherwise (cancelled) keeps its status."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from apps.engine.task import TaskResult
from apps.tasks.events.event_writer import write_events
from apps.tasks.models import Task, TaskEvent
from apps.tasks.run.lifecycle import finish_task
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db(transaction=True)

USAGE = {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 0, "cache_write_tokens": 0}


def finished_event(task: Task, status: str, **data) -> TaskEvent:
    data = {"status": status, "final": "the answer", "usage": {**USAGE, "llm_calls": 1}, **data}
    return TaskEvent(
        task=task, seq=1, type="task_finished", data={"cost": 0.5, **data}, ts=timezone.now()
    )


def new_task(tmp_path, status="running") -> Task:
    user = make_user("ender")
    task = make_task(user, make_workspace("ws", tmp_path, user), goal="g")
    Task.objects.filter(pk=task.pk).update(status=status)
    return Task.objects.get(pk=task.pk)


async def test_the_final_status_answer_and_usage_commit_with_task_finished(tmp_path):
    task = await sync_to_async(new_task)(tmp_path)
    await write_events(task.pk, [finished_event(task, "completed")])
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert (row.status, row.result, row.cost, row.last_seq) == ("completed", "the answer", 0.5, 1)
    assert row.usage["llm_calls"] == 1 and row.finished_at is not None


async def test_the_hook_adds_the_failure_fields_over_the_same_final_status(tmp_path):
    task = await sync_to_async(new_task)(tmp_path)
    await write_events(task.pk, [finished_event(task, "failed")])
    result = TaskResult(task_id=task.pk, status="failed", final="partial", salvage={"files": []})
    await asyncio.to_thread(finish_task, task.pk, result, {"salvage": {"files": ["a.py"]}})
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert (row.status, row.result, row.salvage) == ("failed", "partial", {"files": ["a.py"]})


async def test_a_task_already_ended_otherwise_keeps_its_status(tmp_path):
    task = await sync_to_async(new_task)(tmp_path, status="cancelled")
    await write_events(task.pk, [finished_event(task, "completed")])
    await asyncio.to_thread(finish_task, task.pk, TaskResult(task_id=task.pk, status="completed"))
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert (row.status, row.result) == ("cancelled", "")


def _statements_of_finish(task_id: int, result: TaskResult, written: str | None) -> list[str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        finish_task(task_id, result, None, written)
    return [query["sql"].lstrip().upper() for query in captured.captured_queries]


async def test_the_hook_writes_nothing_over_the_row_task_finished_committed(tmp_path):
    """With 50 tasks ending together, a second UPDATE per task queued 50 more write transactions
    against the streams' event rows; the committed row already says it all."""
    task = await sync_to_async(new_task)(tmp_path)
    await write_events(task.pk, [finished_event(task, "completed")])
    result = TaskResult(task_id=task.pk, status="completed", final="the answer")
    statements = await asyncio.to_thread(_statements_of_finish, task.pk, result, "completed")
    assert statements and not [sql for sql in statements if sql.startswith("UPDATE")]
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert (row.status, row.result) == ("completed", "the answer")


async def test_a_run_whose_task_finished_did_not_commit_gets_its_status_from_the_hook(tmp_path):
    task = await sync_to_async(new_task)(tmp_path)
    result = TaskResult(task_id=task.pk, status="cancelled", final="")
    await asyncio.to_thread(_statements_of_finish, task.pk, result, None)
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert row.status == "cancelled" and row.finished_at is not None


async def test_the_hook_returns_the_stored_status_for_the_runner(tmp_path):
    """The end-of-run hook's worker-thread trip reads the status the task has once its work is
    done (lifecycle.py); run_task returns it without a trip of its own. A task ended otherwise
    before its task_finished committed (cancelled) is reported as stored, not as the engine's
    result."""
    from apps.tasks.events.recorder import EventRecorder
    from apps.tasks.run.lifecycle import RunnerHooks

    def two_tasks():
        user = make_user("ender")
        workspace = make_workspace("ws", tmp_path, user)
        tasks = [make_task(user, workspace, goal=f"g{i}") for i in range(2)]
        Task.objects.filter(pk=tasks[0].pk).update(status="cancelled")
        Task.objects.filter(pk=tasks[1].pk).update(status="running")
        return list(Task.objects.select_related("workspace").filter(pk__in=[t.pk for t in tasks]))

    cancelled, running = sorted(await sync_to_async(two_tasks)(), key=lambda t: t.pk)
    stored = {}
    for task, status in ((cancelled, "completed"), (running, "failed")):
        recorder = EventRecorder(task)
        await write_events(task.pk, [finished_event(task, status)])
        hooks = RunnerHooks(task.pk, mode="react", recorder=recorder)
        result = TaskResult(task_id=task.pk, status=status, final="partial")
        await (hooks.on_task_complete if status == "completed" else hooks.on_task_failed)(result)
        stored[task.pk] = recorder.stored_status
    assert stored == {cancelled.pk: "cancelled", running.pk: "failed"}


def test_the_end_of_run_work_survives_a_cancel_while_it_waits_for_a_thread(tmp_path):
    """The engine fires the hook in its `finally`; a second cancel there (the loop shutting
    down, say) must not drop the final status and the evolution job with the job still queued
    for a worker thread."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from apps.tasks.run.lifecycle import RunnerHooks

    task = new_task(tmp_path)

    async def cancel_the_hook_while_the_only_thread_is_busy():
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        release = threading.Event()
        busy = loop.run_in_executor(None, release.wait)
        hooks = RunnerHooks(task.pk, mode="react")
        result = TaskResult(task_id=task.pk, status="failed", final="partial")
        hook = asyncio.create_task(hooks.on_task_failed(result))
        await asyncio.sleep(0.05)
        hook.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hook
        release.set()
        await busy

    asyncio.run(cancel_the_hook_while_the_only_thread_is_busy())  # waits for the executor
    row = Task.objects.get(pk=task.pk)
    assert (row.status, row.result) == ("failed", "partial")


def test_an_aborted_run_ends_its_spec_even_if_cancelled_while_it_waits_for_a_thread(tmp_path):
    """A run the engine could not run (or that crashed) ends in run_guard.abort_run; a cancel while
    its last job (the final fields, the spec failed) waits for a worker thread must not leave
    the spec open as if it still executed."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from apps.specs.models import Spec, SpecStatus
    from apps.tasks.events.recorder import EventRecorder
    from apps.tasks.run.run_guard import abort_run

    task = new_task(tmp_path)
    task = Task.objects.select_related("workspace").get(pk=task.pk)
    spec = Spec.objects.create(
        task=task, workspace=task.workspace, goal="g", draft={}, status=SpecStatus.EXECUTING
    )
    error = {"error_code": "internal_error", "message": "m", "suggestions": [], "retryable": True}

    async def cancel_the_abort_while_the_only_thread_is_busy():
        loop = asyncio.get_running_loop()
        executor = ThreadPoolExecutor(max_workers=1)
        loop.set_default_executor(executor)
        first, second = threading.Event(), threading.Event()
        busy = [loop.run_in_executor(None, first.wait)]
        recorder = EventRecorder(task)
        abort = asyncio.create_task(abort_run(recorder, task, None, error, time.monotonic()))
        await asyncio.sleep(0.05)  # its look for open reviews waits behind `first`
        busy.append(loop.run_in_executor(None, second.wait))  # queued after that look
        first.set()
        while not recorder.finished:  # task_finished committed: its last job is queued next
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        abort.cancel()
        with pytest.raises(asyncio.CancelledError):
            await abort
        second.set()
        await asyncio.gather(*busy)

    asyncio.run(cancel_the_abort_while_the_only_thread_is_busy())  # waits for the executor
    assert Task.objects.get(pk=task.pk).status == "failed"
    spec.refresh_from_db()
    assert spec.status == SpecStatus.FAILED
