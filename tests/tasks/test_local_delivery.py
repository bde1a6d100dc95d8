"""A runner on the serving loop hands each committed batch straight to this process's sockets
that follow the task (consumers.deliver_local); the channel layer carries the same batch for
other processes, and a socket that gets both sends every event once, in order."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import InMemoryChannelLayer

from apps.tasks.models import Task
from apps.tasks.recorder import EventRecorder
from tests.tasks.factories import make_task
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
