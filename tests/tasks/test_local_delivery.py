"""A runner on the serving loop hands each committed batch straight to this process's sockets
that follow the task (local_delivery.deliver_local); the channel layer carries the same batch for
other processes, and a socket that gets both sends every event once, in order."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import InMemoryChannelLayer

from apps.tasks.events.recorder import EventRecorder
from apps.tasks.models import Task
from tests.tasks.factories import add_events, make_task
from tests.tasks.test_consumer import open_socket, people  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


async def _recorder(task_id: int) -> EventRecorder:
    task = await sync_to_async(Task.objects.select_related("workspace").get)(pk=task_id)
    return EventRecorder(task, flush_interval_ms=0)


async def _frames(communicator, count: int, timeout: float = 5) -> list[tuple[int, str]]:
    frames = [await communicator.receive_json_from(timeout=timeout) for _ in range(count)]
    return [(frame["seq"], frame["type"]) for frame in frames]


async def test_a_socket_of_the_same_process_gets_events_without_the_channel_layer(people):  # noqa: F811
    task = await sync_to_async(make_task)(people["alice"], people["alpha"])
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to({"type": "resume", "task_id": task.pk, "after_seq": 0})
    assert await communicator.receive_nothing(timeout=0.2)
    recorder = await _recorder(task.pk)
    recorder.layer = InMemoryChannelLayer()  # a layer nobody listens on: nothing arrives by it
    await recorder.record("task_started", {})
    await recorder.record("token", {"step": 1, "text": "hi"})
    await recorder.record("task_finished", {"status": "completed"})
    await recorder.aclose()
    # Well before the socket's database catch-up (CATCH_UP_SECONDS) could have sent them.
    assert await _frames(communicator, 3, timeout=1) == [
        (1, "task_started"),
        (2, "token"),
        (3, "task_finished"),
    ]
    await communicator.disconnect()


async def test_local_and_channel_layer_delivery_together_send_each_event_once(people):  # noqa: F811
    task = await sync_to_async(make_task)(people["alice"], people["alpha"])
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to({"type": "resume", "task_id": task.pk, "after_seq": 0})
    assert await communicator.receive_nothing(timeout=0.2)
    recorder = await _recorder(task.pk)  # the process's layer: both paths deliver
    await recorder.record("task_started", {})
    for i in range(10):
        await recorder.record("token", {"step": 1, "text": str(i)})
    await recorder.record("task_finished", {"status": "completed"})
    await recorder.aclose()
    assert [seq for seq, _ in await _frames(communicator, 12)] == list(range(1, 13))
    assert await communicator.receive_nothing(timeout=0.5)  # no duplicate frame
    await communicator.disconnect()


async def test_a_batch_socket_gets_one_frame_per_delivery_and_a_plain_socket_one_per_event(people):  # noqa: F811
    task = await sync_to_async(make_task)(people["alice"], people["alpha"])
    batch = await open_socket(people["alice"], "/ws/chat/?frames=batch")
    plain = await open_socket(people["alice"])
    for socket in (batch, plain):
        await socket.send_json_to({"type": "resume", "task_id": task.pk, "after_seq": 0})
        assert await socket.receive_nothing(timeout=0.2)
    task = await sync_to_async(Task.objects.select_related("workspace").get)(pk=task.pk)
    # The window is long: the tool calls wait for task_finished (a token would not: the engine
    # held its text already, recorder.py PACED).
    recorder = EventRecorder(task, flush_interval_ms=60_000)
    await recorder.record("task_started", {})  # written at once: a batch of one
    for i in range(5):
        await recorder.record("tool_call", {"step": 1, "name": f"tool{i}", "args": {}})
    await recorder.record("task_finished", {"status": "completed"})  # the five calls and it
    await recorder.aclose()
    first = await batch.receive_json_from(timeout=5)
    assert (first["type"], first["seq"]) == ("task_started", 1)  # one event: a plain frame
    second = await batch.receive_json_from(timeout=5)
    assert second["type"] == "batch"
    assert [(e["seq"], e["type"]) for e in second["events"]] == [
        *[(seq, "tool_call") for seq in range(2, 7)],
        (7, "task_finished"),
    ]
    assert await batch.receive_nothing(timeout=0.3)
    assert [seq for seq, _ in await _frames(plain, 7)] == list(range(1, 8))
    # A replay is one delivery too.
    late = await open_socket(people["alice"], "/ws/chat/?frames=batch")
    await late.send_json_to({"type": "resume", "task_id": task.pk, "after_seq": 2})
    replayed = await late.receive_json_from(timeout=5)
    assert [e["seq"] for e in replayed["events"]] == [3, 4, 5, 6, 7]
    for socket in (batch, plain, late):
        await socket.disconnect()


async def test_a_socket_following_a_run_on_its_loop_joins_the_group_only_when_the_run_ends(people):  # noqa: F811
    from channels.layers import get_channel_layer

    from apps.tasks.events.local_delivery import local_run_ended, local_run_started, task_group

    task = await sync_to_async(make_task)(people["alice"], people["alpha"])
    local_run_started(task.pk)  # as executors._spawn does for an inline run
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to({"type": "resume", "task_id": task.pk, "after_seq": 0})
    assert await communicator.receive_nothing(timeout=0.2)
    stored = await sync_to_async(add_events)(task, "task_started", "token")
    layer = get_channel_layer()
    message = {"type": "task.events", "events": [e.as_message() for e in stored]}
    await layer.group_send(task_group(task.pk), message)
    assert await communicator.receive_nothing(timeout=0.3)  # not in the group: no echo
    local_run_ended(task.pk)  # the run is over and the task unfinished: the socket joins
    for _ in range(50):
        await asyncio.sleep(0.02)
        await layer.group_send(task_group(task.pk), message)
        if not await communicator.receive_nothing(timeout=0.05):
            break
    assert [seq for seq, _ in await _frames(communicator, 2)] == [1, 2]
    await communicator.disconnect()


async def test_batches_queued_behind_a_delivery_in_progress_keep_their_order(people):  # noqa: F811
    # A socket with nothing in progress gets a batch right in the flush (deliver_local awaits its
    # send); one busy with a delivery (a replay, say) gets the batches queued behind it, in order.
    from apps.tasks.events.local_delivery import followers

    task = await sync_to_async(make_task)(people["alice"], people["alpha"])
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to({"type": "resume", "task_id": task.pk, "after_seq": 0})
    assert await communicator.receive_nothing(timeout=0.2)
    (consumer,) = followers(task.pk)
    recorder = await _recorder(task.pk)
    recorder.layer = InMemoryChannelLayer()  # a layer nobody listens on: only local delivery
    await recorder.record("task_started", {})
    assert await _frames(communicator, 1, timeout=1) == [(1, "task_started")]  # at once
    async with consumer.delivery:  # a delivery in progress
        for i in range(3):
            await recorder.record("token", {"step": 1, "text": str(i)})
            await recorder.flush()
        assert len(consumer.queued_deliveries) == 3
        assert await communicator.receive_nothing(timeout=0.1)
    await recorder.record("task_finished", {"status": "completed"})  # behind the queued ones
    await recorder.aclose()
    assert await _frames(communicator, 4, timeout=2) == [
        (2, "token"),
        (3, "token"),
        (4, "token"),
        (5, "task_finished"),
    ]
    await communicator.disconnect()
