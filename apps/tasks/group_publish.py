"""The recorders' channel-layer sends of one event loop, coalesced (recorder.py hands each
committed batch here).

Every flush of every running task used to be its own `group_send`: with the Redis Pub/Sub layer
one PUBLISH round trip each (a lock, a pooled connection, a write and a read on the serving
loop), ~1,000 a second for 50 streaming tasks — about a tenth of the loop's CPU, paid even when
no other process listens. Here a loop's sends queue in one FIFO drained by one task: what
queued meanwhile goes out in one pipeline per Redis shard (one write, one read), so the batches
that one writer transaction committed for many tasks (event_writer.py) cost one round trip.
Any other layer gets its `group_send` per message, in the same order.

Nobody listening: Redis answers each PUBLISH with the number of subscribers that got it. When a
group's last message reached none (a task run inline whose only sockets are on this loop and get
each batch from `deliver_local`), its next messages are not sent for QUIET_SECONDS, unless the
caller says a message must go (`must`: the events that change the task's status, recorder.py).
A socket of another process that starts following the task meanwhile loses nothing: it joined
the group and then replayed the stored events (consumers.py `_follow`); the next message it
receives shows the gap, which it fills from the database, and its catch-up poll does the same
every few seconds. Only its live frames may start up to QUIET_SECONDS later.

Order: messages leave in the order they were queued (one drainer per loop), so a task's batches
reach the layer in seq order. A failed send is logged and dropped: the rows are stored, and
sockets catch up from the database (consumers.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

log = logging.getLogger(__name__)

MAX_PIPELINE = 200  # messages per pipeline
QUIET_SECONDS = 0.5  # a group nobody listened to is skipped this long (see above)


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
        self._quiet: dict[str, float] = {}  # group -> until when nobody is assumed to listen
        self.skipped = 0  # messages not sent because nobody listened (tests read it)

    def publish(self, group: str, message: dict, *, must: bool = False) -> int:
        quiet = self._quiet.get(group)
        if quiet is not None and not must:
            if time.monotonic() < quiet:
                self.skipped += 1
                return self._queued  # waiting on it waits for what was queued before
            del self._quiet[group]
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
                batch, self._queue = self._queue[:MAX_PIPELINE], self._queue[MAX_PIPELINE:]
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
        shards = _redis_pubsub_shards(self.layer, batch)
        if shards is None:
            for group, message in batch:
                await self.layer.group_send(group, message)
            return
        for shard, items in shards.items():
            async with shard._lock:  # the shard's own lock: its publish() takes it too
                shard._ensure_redis()
                pipe = shard._redis.pipeline(transaction=False)
                for _, channel, data in items:
                    pipe.publish(channel, data)
                receivers = await pipe.execute()
            until = time.monotonic() + QUIET_SECONDS
            for (group, _, _), count in zip(items, receivers, strict=True):
                if count == 0:
                    self._quiet[group] = until
                else:
                    self._quiet.pop(group, None)


def _redis_pubsub_shards(layer: Any, batch: list[tuple[str, dict]]) -> dict | None:
    """channels_redis's Pub/Sub layer: {shard: [(group, channel, serialized message)]}, each
    shard's in queue order; None for any other layer."""
    try:
        from channels_redis.pubsub import RedisPubSubChannelLayer
    except ImportError:  # pragma: no cover - channels_redis is a dependency
        return None
    if not isinstance(layer, RedisPubSubChannelLayer):
        return None
    loop_layer = layer._get_layer()
    shards: dict[Any, list[tuple[str, str, bytes]]] = {}
    for group, message in batch:
        channel = loop_layer._get_group_channel_name(group)
        shard = loop_layer._get_shard(channel)
        shards.setdefault(shard, []).append((group, channel, layer.serialize(message)))
    return shards


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
