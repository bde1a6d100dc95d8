"""Cancellation requested through the API or a socket (any process) reaches running engines here.

One poller per event loop asks the database every `CANCEL_POLL_SECONDS` which of the tasks
running on that loop have `cancel_requested_at` set — one query for all of them, instead of one
query per task per poll (50 running tasks would otherwise make 200 queries a second on the
thread pool that also writes their events)."""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import sync_to_async

from apps.engine.loop.cancellation import CancellationToken
from apps.tasks.models import Task

log = logging.getLogger(__name__)

CANCEL_POLL_SECONDS = 0.25


def cancel_requested(task_ids: list[int]) -> set[int]:
    return set(
        Task.objects.filter(pk__in=task_ids, cancel_requested_at__isnull=False).values_list(
            "pk", flat=True
        )
    )


class _Poller:
    def __init__(self) -> None:
        self.watched: dict[int, list[CancellationToken]] = {}
        self.task: asyncio.Task | None = None

    def add(self, task_id: int, token: CancellationToken) -> None:
        self.watched.setdefault(task_id, []).append(token)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._poll(), name="cancel-poller")

    def remove(self, task_id: int, token: CancellationToken) -> None:
        tokens = self.watched.get(task_id, [])
        if token in tokens:
            tokens.remove(token)
        if not tokens:
            self.watched.pop(task_id, None)

    async def _poll(self) -> None:
        while self.watched:
            ids = sorted(self.watched)
            try:
                requested = await sync_to_async(cancel_requested, thread_sensitive=False)(ids)
            except Exception:  # a database hiccup: try again at the next poll
                log.warning("polling for cancel requests failed", exc_info=True)
                requested = set()
            for task_id in requested:
                for token in list(self.watched.get(task_id, [])):
                    token.cancel("cancelled by the user")
            await asyncio.sleep(CANCEL_POLL_SECONDS)


_pollers: dict[asyncio.AbstractEventLoop, _Poller] = {}


async def watch_cancel(task_id: int, token: CancellationToken) -> None:
    """Until cancelled (the runner cancels it when the task ends): cancel `token` once a cancel
    is requested for the task."""
    loop = asyncio.get_running_loop()
    poller = _pollers.get(loop)
    if poller is None:
        poller = _pollers[loop] = _Poller()
        for other in [known for known in _pollers if known.is_closed()]:
            _pollers.pop(other, None)
    poller.add(task_id, token)
    try:
        while not token.cancelled:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
    finally:
        poller.remove(task_id, token)
        if not poller.watched and poller.task is not None:
            poller.task.cancel()  # nothing left to watch on this loop
