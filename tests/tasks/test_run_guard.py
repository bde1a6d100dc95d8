"""The promises that hold when things go wrong around a run (issue 27): a task whose events the
database refuses still ends (storage_error); a task is never run twice at once; one run changes
a workspace at a time, the next one says whom it waits for; a cancel of a task nobody runs ends
it at once. Real SQLite, the real runner, the scripted model."""

from __future__ import annotations

import asyncio
import textwrap
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

from apps.tasks.dispatch.liveness import run_claim, run_release
from apps.tasks.models import Task, TaskEvent, WorkspaceLease
from apps.tasks.run.runner import run_task
from apps.tasks.services import task_request_cancel
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)


def contiguous_with_one_end(task) -> list[TaskEvent]:
    events = events_of(task)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.type for e in events].count("task_finished") == 1
    assert events[-1].type == "task_finished"
    return events


def refuse_inserts(kind: str, create: bool = True) -> None:
    """A real refusal by the database (a trigger standing in for a constraint or a value it
    cannot store) of every `kind` row but the minimal end's own (storage_error)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TRIGGER refuse_{kind} BEFORE INSERT ON tasks_taskevent "
            f"WHEN NEW.type = '{kind}' AND NEW.data NOT LIKE '%storage_error%' "
            "BEGIN SELECT RAISE(ABORT, 'refused by the database'); END"
            if create
            else f"DROP TRIGGER refuse_{kind}"
        )


@pytest.mark.parametrize("refused", ["token", "final_answer", "task_finished"])
async def test_events_the_database_refuses_end_the_task_with_storage_error(demo, refused):
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal="hello", mode="direct_chat")
    await sync_to_async(refuse_inserts)(refused)
    try:
        status = await asyncio.wait_for(run_task(task.pk), 60)
    finally:
        await sync_to_async(refuse_inserts)(refused, create=False)
    assert status == "failed"
    stored = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert stored.status == "failed" and stored.error["error_code"] == "storage_error"
    assert stored.run_owner == ""  # the claim went with the run
    events = await sync_to_async(contiguous_with_one_end)(task)
    assert events[-2].type == "error"
    assert events[-2].data["error_struct"]["error_code"] == "storage_error"
    assert events[-1].data["status"] == "failed"


async def test_a_task_claimed_by_a_live_run_is_not_started_again(demo):
    """A re-sent message whose task is still queued: the second start does nothing."""
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal="hello", mode="direct_chat")
    claim = await sync_to_async(run_claim)(task.pk)  # a live run of another process holds it
    assert claim is not None
    assert await run_task(task.pk) == "queued"
    assert await sync_to_async(TaskEvent.objects.filter(task=task).count)() == 0
    await sync_to_async(run_release)(task.pk, claim)
    assert await run_task(task.pk) == "completed"


async def test_a_claim_whose_heartbeat_went_stale_is_taken_over(demo):
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal="hello", mode="direct_chat")
    long_ago = timezone.now() - timedelta(minutes=5)
    await sync_to_async(Task.objects.filter(pk=task.pk).update)(
        run_owner="gone-host:1:abc", heartbeat_at=long_ago
    )
    assert await run_task(task.pk) == "completed"


async def wait_for_event(task, kind: str, timeout: float = 30) -> None:
    def stored() -> bool:
        return TaskEvent.objects.filter(task=task, type=kind).exists()

    deadline = asyncio.get_running_loop().time() + timeout
    while not await sync_to_async(stored)():
        assert asyncio.get_running_loop().time() < deadline, f"no {kind} for task {task.pk}"
        await asyncio.sleep(0.05)


def slow_script(tmp_path, name: str, seconds: float) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        textwrap.dedent(
            f"""
            - text: "working"
              tool_calls: [{{name: shell, arguments: {{command: "sleep {seconds}"}}}}]
            - "done"
            - "done"
            - "done"
            """
        )
    )
    return str(path)


async def test_two_runs_on_one_workspace_never_overlap_and_the_second_says_why(
    demo, config_file, tmp_path
):
    user, workspace, _ = demo
    config_file(
        f"models: {{main: {{provider: scripted, script: {slow_script(tmp_path, 's', 1.5)}}}}}\n"
    )
    first = await sync_to_async(make_task)(user, workspace, goal="one")
    second = await sync_to_async(make_task)(user, workspace, goal="two")
    chat = await sync_to_async(make_task)(user, workspace, goal="hi", mode="direct_chat")
    runs = [asyncio.create_task(run_task(first.pk))]
    await wait_for_event(first, "task_started")
    runs.append(asyncio.create_task(run_task(second.pk)))
    await wait_for_event(second, "task_waiting")
    # direct_chat changes nothing: it does not wait for the workspace
    assert await asyncio.wait_for(run_task(chat.pk), 30) == "completed"
    assert not runs[0].done()
    assert await asyncio.wait_for(asyncio.gather(*runs), 60) == ["completed", "completed"]

    one = await sync_to_async(contiguous_with_one_end)(first)
    two = await sync_to_async(contiguous_with_one_end)(second)
    assert two[0].type == "task_waiting"
    assert two[0].data == {
        "reason": f"waiting for task #{first.pk} on this workspace",
        "waiting_for": first.pk,
        "goal": "two",
        "mode": "react",
    }
    started = next(e for e in two if e.type == "task_started")
    assert one[-1].ts <= started.ts  # the second ran after the first ended
    chat_end = (await sync_to_async(events_of)(chat))[-1]
    assert chat_end.ts < one[-1].ts
    assert await sync_to_async(WorkspaceLease.objects.count)() == 0  # released at the end


async def test_a_task_waiting_for_the_workspace_can_be_cancelled(demo, config_file, tmp_path):
    user, workspace, _ = demo
    config_file(
        f"models: {{main: {{provider: scripted, script: {slow_script(tmp_path, 's', 3)}}}}}\n"
    )
    first = await sync_to_async(make_task)(user, workspace, goal="one")
    second = await sync_to_async(make_task)(user, workspace, goal="two")
    running = asyncio.create_task(run_task(first.pk))
    await wait_for_event(first, "task_started")
    waiting = asyncio.create_task(run_task(second.pk))
    await wait_for_event(second, "task_waiting")
    stored = await sync_to_async(Task.objects.get)(pk=second.pk)
    assert stored.status == "queued"
    assert await sync_to_async(task_request_cancel)(task=stored)
    assert await asyncio.wait_for(waiting, 10) == "cancelled"
    assert not running.done()  # the first goes on
    assert await asyncio.wait_for(running, 60) == "completed"
    events = await sync_to_async(contiguous_with_one_end)(second)
    assert [e.type for e in events] == ["task_waiting", "task_finished"]


async def test_a_lease_whose_holder_died_is_taken_by_the_next_run(demo):
    user, workspace, _ = demo
    dead = await sync_to_async(make_task)(user, workspace, goal="dead", status="running")
    long_ago = timezone.now() - timedelta(minutes=5)
    await sync_to_async(Task.objects.filter(pk=dead.pk).update)(
        run_owner="gone-host:1:abc", heartbeat_at=long_ago
    )
    await sync_to_async(WorkspaceLease.objects.create)(
        workspace=workspace, key=f"workspace:{workspace.pk}", task=dead
    )
    task = await sync_to_async(make_task)(user, workspace, goal="hello")
    assert await asyncio.wait_for(run_task(task.pk), 60) == "completed"
    events = await sync_to_async(events_of)(task)
    assert "task_waiting" not in [e.type for e in events]


def test_cancel_of_a_task_no_run_holds_ends_it_at_once(demo):
    user, workspace, _ = demo
    orphan = make_task(user, workspace, goal="orphan", status="running")
    long_ago = timezone.now() - timedelta(minutes=5)
    Task.objects.filter(pk=orphan.pk).update(
        run_owner="gone-host:1:abc", heartbeat_at=long_ago, last_seq=0
    )
    assert task_request_cancel(task=Task.objects.get(pk=orphan.pk))
    stored = Task.objects.get(pk=orphan.pk)
    assert stored.status == "cancelled" and stored.finished_at is not None
    events = contiguous_with_one_end(stored)
    assert events[-1].data["status"] == "cancelled"

    alive = make_task(user, workspace, goal="alive", status="running")
    claim = run_claim(alive.pk)
    try:
        assert task_request_cancel(task=Task.objects.get(pk=alive.pk))
        stored = Task.objects.get(pk=alive.pk)
        assert stored.status == "running" and stored.cancel_requested_at is not None
    finally:
        run_release(alive.pk, claim)
