"""The runner's event write path (apps/tasks/events/recorder.py, event_writer.py) on real SQLite: batches
per flush window, immediate writes for status-changing events, nothing lost on a crash or cancel,
broadcast in order exactly once, 50 concurrent tasks with contiguous seqs."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections

from apps.tasks.doors.consumers import task_group
from apps.tasks.events.event_writer import event_writer, write_events
from apps.tasks.events.recorder import EventRecorder
from apps.tasks.models import Task, TaskEvent
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db(transaction=True)


def _tasks(tmp_path, count: int = 1, mode: str = "react") -> list[Task]:
    user = make_user("writer")
    workspace = make_workspace("ws", tmp_path, user)
    return [
        Task.objects.select_related("workspace").get(
            pk=make_task(user, workspace, goal=f"g{i}", mode=mode).pk
        )
        for i in range(count)
    ]


def _stored(task_id: int) -> list[tuple[int, str]]:
    return list(
        TaskEvent.objects.filter(task_id=task_id).order_by("seq").values_list("seq", "type")
    )


def _last_seq(task_id: int) -> int:
    return Task.objects.get(pk=task_id).last_seq


async def test_events_within_one_window_are_written_in_one_transaction(tmp_path):
    (task,) = await sync_to_async(_tasks)(tmp_path)
    recorder = EventRecorder(task, flush_interval_ms=300)
    await recorder.record("task_started", {"mode": "react"})  # immediate: one transaction
    assert recorder.flushes == 1
    for i in range(20):
        await recorder.record("token", {"step": 1, "text": f"w{i} "})
    # The first token after a quiet window starts a flush at once; the others wait for the
    # window's end and go together.
    await asyncio.sleep(0.8)
    assert await sync_to_async(_stored)(task.pk) == [(1, "task_started")] + [
        (seq, "token") for seq in range(2, 22)
    ]
    assert recorder.flushes <= 3
    assert await sync_to_async(_last_seq)(task.pk) == 21
    await recorder.aclose()


async def test_status_changing_events_are_stored_before_record_returns(tmp_path):
    (task,) = await sync_to_async(_tasks)(tmp_path)
    recorder = EventRecorder(task, flush_interval_ms=60_000)  # nothing would flush by time
    await recorder.record("task_started", {"mode": "react"})
    assert await sync_to_async(_stored)(task.pk) == [(1, "task_started")]
    refreshed = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert refreshed.status == "running" and refreshed.started_at is not None
    await recorder.record("tool_call", {"step": 1, "name": "think"})
    await asyncio.sleep(0.05)
    assert await sync_to_async(_stored)(task.pk) == [(1, "task_started")]  # still queued
    # a react step's end is written before the next step: a run taken over from its stored
    # events (reaper.py) must not take a finished step again
    await recorder.record("tool_result", {"step": 1, "name": "think", "ok": True})
    assert await sync_to_async(_stored)(task.pk) == [
        (1, "task_started"),
        (2, "tool_call"),
        (3, "tool_result"),
    ]
    await recorder.record("error", {"step": 1, "fatal": True, "error_struct": {}})
    assert await sync_to_async(_stored)(task.pk) == [
        (1, "task_started"),
        (2, "tool_call"),
        (3, "tool_result"),
        (4, "error"),
    ]
    assert recorder.final_written is None
    await recorder.record("task_finished", {"status": "failed"})
    assert recorder.finished and recorder.final_written == "failed"  # committed with that status
    assert await sync_to_async(_last_seq)(task.pk) == 5
    await recorder.aclose()


async def test_a_token_reaches_the_writer_before_record_returns(tmp_path):
    """A token (its text already held for the window by the engine) is handed to the writer
    thread by record() itself, not by a flush task the loop would run later: it is committed
    even while the loop does nothing else."""
    (task,) = await sync_to_async(_tasks)(tmp_path)
    recorder = EventRecorder(task, flush_interval_ms=60_000)
    await recorder.record("task_started", {"mode": "react"})
    await recorder.record("token", {"step": 1, "text": "a"})
    with concurrent.futures.ThreadPoolExecutor(1) as reader:  # the loop stays blocked
        deadline = time.monotonic() + 10
        while (stored := reader.submit(_stored, task.pk).result()) == [(1, "task_started")]:
            assert time.monotonic() < deadline, "the token was not committed"
            time.sleep(0.01)
        reader.submit(connections.close_all).result()
    assert stored == [(1, "task_started"), (2, "token")]
    await recorder.aclose()


@pytest.mark.parametrize("mode", ["plan_exec", "team_collab"])
async def test_a_resumable_runs_tool_result_is_stored_before_the_run_goes_on(tmp_path, mode):
    """A resumed run rebuilds its conversation from stored events: a tool that changed the
    workspace must be on record before the next model call, or a kill there redoes the step."""
    (task,) = await sync_to_async(_tasks)(tmp_path, mode=mode)
    recorder = EventRecorder(task, flush_interval_ms=60_000)  # nothing would flush by time
    await recorder.record("task_started", {"mode": mode})
    await recorder.record("tool_call", {"step": 1, "name": "write_file"})
    await recorder.record("tool_result", {"step": 1, "name": "write_file", "ok": True})
    assert await sync_to_async(_stored)(task.pk) == [
        (1, "task_started"),
        (2, "tool_call"),
        (3, "tool_result"),
    ]
    await recorder.aclose()


async def test_a_react_runs_tool_result_is_stored_before_record_returns(tmp_path):
    # A react task whose worker died goes on from its stored events (reaper.py): the step whose
    # tool already changed the workspace must be stored before the next step begins.
    (task,) = await sync_to_async(_tasks)(tmp_path)
    recorder = EventRecorder(task, flush_interval_ms=60_000)
    await recorder.record("task_started", {"mode": "react"})
    await recorder.record("tool_result", {"step": 1, "name": "write_file", "ok": True})
    assert await sync_to_async(_stored)(task.pk) == [(1, "task_started"), (2, "tool_result")]
    await recorder.aclose()


async def test_a_token_is_not_held_for_the_recorders_window_again(tmp_path):
    # The engine's DeltaBatcher held the token's text for the window already: it is written as
    # soon as no write is in flight, even a moment after the last flush (a tool_call waits for
    # the window: test_status_changing_events_are_stored_before_record_returns).
    (task,) = await sync_to_async(_tasks)(tmp_path)
    recorder = EventRecorder(task, flush_interval_ms=60_000)
    await recorder.record("task_started", {"mode": "react"})
    await recorder.record("token", {"step": 1, "text": "w0 "})
    async with asyncio.timeout(30):  # far below the 60 s window
        while recorder.flushes < 2:
            await asyncio.sleep(0.01)
    assert await sync_to_async(_stored)(task.pk) == [(1, "task_started"), (2, "token")]
    await recorder.aclose()


async def test_a_cancelled_run_loses_no_event_it_recorded(tmp_path):
    (task,) = await sync_to_async(_tasks)(tmp_path)
    recorder = EventRecorder(task, flush_interval_ms=60_000)
    recorded = asyncio.Event()

    async def run():  # the runner's shape: record, and close the recorder in `finally`
        try:
            await recorder.record("task_started", {})
            for i in range(5):
                await recorder.record("token", {"step": 1, "text": str(i)})
            recorded.set()
            await asyncio.sleep(3600)
        finally:
            await recorder.aclose()

    runner = asyncio.create_task(run())
    await recorded.wait()
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert [seq for seq, _ in await sync_to_async(_stored)(task.pk)] == [1, 2, 3, 4, 5, 6]
    assert await sync_to_async(_last_seq)(task.pk) == 6


async def test_a_failed_write_keeps_the_events_and_the_next_flush_writes_them(tmp_path):
    (task,) = await sync_to_async(_tasks)(tmp_path)
    recorder = EventRecorder(task, flush_interval_ms=60_000)
    await recorder.record("task_started", {})
    await sync_to_async(Task.objects.filter(pk=task.pk).delete)()  # rows cannot be written now
    await recorder.record("token", {"step": 1, "text": "kept"})
    with pytest.raises(Exception):  # noqa: B017 — the database's own integrity error
        await recorder.flush()
    assert [event.seq for event in recorder._queued] == [2]  # still queued, in order


async def test_broadcast_delivers_every_event_once_in_order(tmp_path):
    (task,) = await sync_to_async(_tasks)(tmp_path)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(task_group(task.pk), channel)
    recorder = EventRecorder(task, flush_interval_ms=20)
    await recorder.record("task_started", {})
    for i in range(40):
        await recorder.record("token", {"step": 1, "text": str(i)})
        if i % 7 == 0:
            await asyncio.sleep(0.03)  # several windows
    await recorder.record("task_finished", {"status": "completed"})
    received: list[int] = []
    while len(received) < 42:
        message = await asyncio.wait_for(layer.receive(channel), 5)
        assert message["type"] == "task.events"
        received += [event["seq"] for event in message["events"]]
    assert received == list(range(1, 43))
    assert 2 < recorder.flushes < 42  # batched, not one write per event


@pytest.mark.parametrize("flush_interval_ms", [0, 50])
async def test_fifty_concurrent_tasks_write_contiguous_seqs_without_lock_errors(
    tmp_path, flush_interval_ms
):
    tasks = await sync_to_async(_tasks)(tmp_path, 50)
    writer = event_writer()
    before = writer.transactions

    async def one(task: Task) -> EventRecorder:
        recorder = EventRecorder(task, flush_interval_ms=flush_interval_ms)
        await recorder.record("task_started", {"mode": "react"})
        for step in range(60):
            await recorder.record("token", {"step": 1, "text": f"{step} "})
            if step % 10 == 0:
                await asyncio.sleep(0)  # interleave like streaming tasks do
        await recorder.record("task_finished", {"status": "completed"})
        await recorder.aclose()
        return recorder

    recorders = await asyncio.gather(*(one(task) for task in tasks))
    for task, recorder in zip(tasks, recorders, strict=True):
        stored = await sync_to_async(_stored)(task.pk)
        assert [seq for seq, _ in stored] == list(range(1, 63)), task.pk
        assert await sync_to_async(_last_seq)(task.pk) == 62
        assert recorder.flushes < 62
    # Far fewer transactions than rows: batches of several tasks share one.
    assert writer.transactions - before < 50 * 62 / 4


async def test_one_tasks_bad_batch_does_not_fail_another_tasks_events(tmp_path):
    first, second = await sync_to_async(_tasks)(tmp_path, 2)
    from django.utils import timezone

    now = timezone.now()
    taken = TaskEvent(task_id=first.pk, seq=1, type="token", data={}, ts=now)
    await write_events(first.pk, [taken])
    duplicate = TaskEvent(task_id=first.pk, seq=1, type="token", data={}, ts=now)
    good = TaskEvent(task_id=second.pk, seq=1, type="token", data={}, ts=now)
    writer = event_writer()
    failing, fine = writer.submit(first.pk, [duplicate]), writer.submit(second.pk, [good])
    with pytest.raises(Exception):  # noqa: B017 — the unique (task, seq) constraint
        await asyncio.wrap_future(failing)
    await asyncio.wrap_future(fine)
    assert await sync_to_async(_stored)(second.pk) == [(1, "token")]


async def test_a_batch_committed_while_its_follow_up_was_cancelled_is_not_written_twice(tmp_path):
    """The loop shutting down (asyncio.run cancels every task) while a batch is with the writer:
    the writer commits it all the same, and the run's last flush must not write it again
    (an IntegrityError on (task, seq) before)."""
    (task,) = await sync_to_async(_tasks)(tmp_path)
    recorder = EventRecorder(task, flush_interval_ms=0)
    await recorder.record("task_started", {"mode": "react"})
    await recorder.record("token", {"text": "a"})  # handed to the writer at once
    for other in asyncio.all_tasks():  # what asyncio.run does at its end
        if other is not asyncio.current_task():
            other.cancel()
    await asyncio.sleep(0.2)  # the writer thread commits meanwhile
    await recorder.record("token", {"text": "b"})
    await recorder.aclose()
    assert await sync_to_async(_stored)(task.pk) == [
        (1, "task_started"),
        (2, "token"),
        (3, "token"),
    ]
    assert await sync_to_async(_last_seq)(task.pk) == 3
