"""Delivery of a task's events to the sockets of this process, without the channel layer.

The sockets (consumers.ChatConsumer) register here the tasks they follow (`follow`,
`unfollow`); the runner's write path (recorder.py, ending.py) hands each committed batch to them
(`deliver_local`); the inline executor says which tasks run on which loop (`local_run_started`,
`local_run_ended`). This module knows the sockets only through the `Follower` protocol, so the
write path never imports the consumers.

Sockets of this process by followed task, per event loop: the runner of an inline task (same
process, same loop) hands them each batch directly, so their frames do not wait on the channel
layer's round trips. The layer still carries every batch (other processes' sockets, RQ workers'
tasks); the duplicates are dropped by seq.

Tasks running inline in this process are kept by the loop they run on. A socket on that loop that
follows one gets every batch from `deliver_local` and does not join the task's channel-layer
group: the layer would only echo each batch back to this process (a Redis round trip, a decode
and a dispatch per batch and socket, dropped by seq). When the run ends, such sockets join the
group, so a later run of the task elsewhere (another process, RQ) reaches them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

log = logging.getLogger(__name__)


class Follower(Protocol):
    """What a socket offers the write path (consumers.ChatConsumer)."""

    loop: asyncio.AbstractEventLoop
    delivery: asyncio.Lock  # held while the socket sends; batches queue behind it
    queued_deliveries: set[asyncio.Task]
    grouped: set[int]  # tasks whose channel-layer group the socket joined

    async def task_events(self, message: dict) -> None: ...

    async def join_group_unless_finished(self, task_id: int) -> None: ...


def task_group(task_id: int) -> str:
    """The channel-layer group of a task's sockets in every process."""
    return f"task.{task_id}"


_followers: dict[int, set[Follower]] = {}
_local_runs: dict[int, asyncio.AbstractEventLoop] = {}
_local_delivered: dict[int, int] = {}  # the last seq a local run handed to `deliver_local`


def follow(task_id: int, follower: Follower) -> None:
    _followers.setdefault(task_id, set()).add(follower)


def unfollow(task_id: int, follower: Follower) -> None:
    followers = _followers.get(task_id, set())
    followers.discard(follower)
    if not followers:
        _followers.pop(task_id, None)


def followers(task_id: int) -> list[Follower]:
    """The sockets of this process following the task."""
    return list(_followers.get(task_id, ()))


def runs_on(task_id: int, loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the task runs inline on `loop` (its sockets there get every batch directly)."""
    return _local_runs.get(task_id) is loop


def delivered_any(task_id: int) -> bool:
    """Whether the task's local run has handed any batch to `deliver_local` yet."""
    return task_id in _local_delivered


def local_run_started(task_id: int) -> None:
    """On the loop that runs the task inline (executors._spawn), before it starts."""
    _local_runs[task_id] = asyncio.get_running_loop()


def local_run_ended(task_id: int) -> None:
    """On the same loop, when the run is over: followers not in the group join it."""
    _local_runs.pop(task_id, None)
    _local_delivered.pop(task_id, None)
    for follower in followers(task_id):
        if task_id not in follower.grouped:
            follower.loop.create_task(follower.join_group_unless_finished(task_id))


async def deliver_local(task_id: int, events: list[dict]) -> None:
    """Give a committed batch to this process's sockets following the task (runner, same loop).
    A socket with no delivery in progress or queued gets it right here: its send does not wait
    (the server writes the frame at once, agentkit_site/serving.py), so the frame leaves a loop
    pass sooner than from a task of its own, and no task is made. Otherwise the batch queues
    behind those deliveries as a task, so batches still reach the socket in order."""
    if task_id in _local_runs:
        _local_delivered[task_id] = events[-1]["seq"]
    loop = asyncio.get_running_loop()
    message = {"events": events}
    for follower in followers(task_id):
        if follower.loop is not loop:
            continue
        if follower.queued_deliveries or follower.delivery.locked():
            queued = loop.create_task(follower.task_events(message))
            follower.queued_deliveries.add(queued)  # referenced until done; keeps later ones queued
            queued.add_done_callback(follower.queued_deliveries.discard)
            continue
        try:
            await follower.task_events(message)
        except Exception:  # this socket's failure is not the run's
            log.exception("delivering events of task %s to a socket failed", task_id)
