"""The recorders' channel-layer sends of one event loop, in order, off the flush path
(recorder.py hands each committed batch here).

A loop's sends queue in one FIFO drained by one task, each with the layer's own public
`group_send`, so a task's batches reach the layer in seq order and a flush never waits for
Redis. (This module once pipelined the queue per Redis shard through channels_redis's private
internals and skipped groups nobody listened to; both went with issue 29: an upgrade of
channels_redis could have broken them silently. With a worker running tasks, every message has
listeners in other processes anyway.)

A failed send is logged and dropped: the rows are stored, and sockets catch up from the
database (consumers.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)

MAX_BATCH = 200  # messages sent between two wake-ups of `wait_sent` waiters


class GroupPublisher:
    """One per (layer, loop): `publish()` queues and returns a ticket; `wait_sent(ticket)`
    returns once that message (and every one queued before it) has been sent or given up."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self._queue: list[tuple[str, dict]] = []
        self._drainer: asyncio.Task | None = None
        self._queued = 0  # tickets handed out
        self._done = 0  # tickets sent (or failed)
        self._waiters: list[tuple[int, asyncio.Future]] = []

    def publish(self, group: str, message: dict) -> int:
        self._queue.append((group, message))
        self._queued += 1
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return self._queued

    async def wait_sent(self, ticket: int) -> None:
        if ticket <= self._done:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((ticket, waiter))
        await waiter

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                try:
                    await self._send(batch)
                except Exception:  # the rows are stored: sockets catch up by replay
                    log.warning(
                        "channel-layer send of %d messages (groups %s) failed",
                        len(batch),
                        sorted({group for group, _ in batch})[:5],
                        exc_info=True,
                    )
                self._done += len(batch)
                self._wake()
        except asyncio.CancelledError:  # the loop is closing: nobody waits for the rest
            self._queue.clear()
            self._done = self._queued
            self._wake()
            raise

    def _wake(self) -> None:
        if not self._waiters:
            return
        waiting = []
        for ticket, waiter in self._waiters:
            if ticket > self._done:
                waiting.append((ticket, waiter))
            elif not waiter.done():
                waiter.set_result(None)
        self._waiters = waiting

    async def _send(self, batch: list[tuple[str, dict]]) -> None:
        for group, message in batch:
            await self.layer.group_send(group, message)


_publishers: dict[tuple[int, asyncio.AbstractEventLoop], GroupPublisher] = {}


def group_publisher(layer: Any) -> GroupPublisher:
    """The running loop's publisher for `layer` (a closed loop's is dropped)."""
    loop = asyncio.get_running_loop()
    key = (id(layer), loop)
    publisher = _publishers.get(key)
    if publisher is None or publisher.layer is not layer:
        for stale in [k for k in _publishers if k[1].is_closed()]:
            del _publishers[stale]
        publisher = _publishers[key] = GroupPublisher(layer)
    return publisher
