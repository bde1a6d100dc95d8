"""The runner's event write path: engine events → `TaskEvent` rows → channel-layer group.

`EventRecorder.record()` gives each event the next `seq` (continuing after earlier runs of the
task) and queues it; a flush writes everything queued in ONE transaction (the rows plus the
task's `last_seq`, by the process's writer thread: event_writer.py), then hands the batch to this
process's sockets that follow the task (`local_delivery.deliver_local`) and, in order but without
holding up the next flush, to group `task.<id>` as one `task.events` message per
`BROADCAST_MAX_EVENTS`, through the loop's publisher (group_publish.py: one FIFO per loop,
drained with the layer's `group_send`). The consumer drops copies by seq; a socket opened with
`?frames=batch` gets a delivery as one frame, others one frame per event.
Rows are committed before they are delivered, so a socket that replays from the database and then
listens never misses one.

When flushes happen (`streaming.flush_interval_ms` is the window):
- the first event after a quiet window goes out at once (a flush starts as soon as it is queued);
- events queued less than a window after the last flush started wait for the window's end, so a
  task writes at most one transaction per window; while a write is in flight, events queue for
  the next one (with a window of 0 that is all the batching: under load a batch grows instead of
  the queue of single-row writes);
- except `token` and `reasoning` events (PACED): the engine's DeltaBatcher already held their text for the window,
  so they are not held a second time; a flush starts as soon as no write is in flight. (The two
  windows start at different moments, the engine's when it read a chunk, this one when the
  previous flush started a loop turn or more later, so a second hold would add that lag, up to
  tens of ms under load, to the chunks already held longest.)
- a flush due at once is started by record() itself when it can be (`_start_now`): the writer
  thread has the batch before record() returns;
- events that change the task's status or that a user must see at once (`IMMEDIATE`) are written,
  with everything queued before them, before `record()` returns, so status and events never
  disagree;
- in a run that can resume after its process died (plan_exec, team_collab: RESUMABLE_MODES;
  react, from its events), a `tool_result` is written before `record()` returns too: a resumed run rebuilds its conversation
  from stored events, and must not take again a step whose tool already changed the workspace;
- `aclose()` (the runner's `finally`) writes whatever is still queued: a crash or a cancel never
  loses an event the engine yielded.
Flushes are serialized (one lock per recorder), so batches commit and are delivered in seq order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import Any

from channels.layers import get_channel_layer
from django.utils import timezone

from apps.engine.config import AgentkitConfig, StreamingConfig
from apps.specs.checkpoints import RESUMABLE_MODES
from apps.tasks.events.event_writer import submit_events
from apps.tasks.events.group_publish import group_publisher
from apps.tasks.events.local_delivery import deliver_local, task_group
from apps.tasks.failure import internal_paths, scrub_event, secrets_of
from apps.tasks.models import Task, TaskEvent

log = logging.getLogger(__name__)


class StorageFailed(Exception):
    """The task's events could not be written, a second try included: the runner ends the task
    through the minimal write path (ending.py, `storage_error`)."""


# Written (with all queued before them) before record() returns: they change the task's status
# or stop the run, and a client acting on them must find the database in agreement; a
# `phase_changed` is the checkpoint a resumed plan_exec run goes on from (resume.py).
IMMEDIATE = frozenset(
    {
        "task_waiting",
        "task_started",
        "task_resumed",
        "phase_changed",
        "error",
        "spec_review_request",
        "spec_review_resolved",
        "task_finished",
    }
)
DURABLE_STEPS = IMMEDIATE | {"tool_result"}  # the set of a resumable run (see above)
# held for the window by the engine already: not held again here
PACED = frozenset({"token", "reasoning"})
MAX_QUEUED = 500  # back-pressure: past this many unwritten events, record() waits for a flush
BROADCAST_MAX_EVENTS = 100  # events per channel-layer message


def flush_window_seconds(config: AgentkitConfig | None = None) -> float:
    """`streaming.flush_interval_ms` in seconds; the shipped default when the config is absent
    or cannot be read (the runner reports a broken config through its own error path)."""
    if config is None:
        try:
            from apps.tasks.conf import agent_config

            config = agent_config()
        except Exception:
            return StreamingConfig().flush_interval_ms / 1000
    return config.streaming.flush_interval_ms / 1000


class EventRecorder:
    """Persists and broadcasts one task's events in batches (see the module docstring)."""

    def __init__(
        self,
        task: Task,
        config: AgentkitConfig | None = None,
        *,
        flush_interval_ms: int | None = None,
    ):
        self.task_id = task.pk
        # Failure handling: no internal path or secret reaches an error text (failure.py).
        self.paths = internal_paths(task.workspace.root_dir)
        self.secrets = secrets_of(config) if config is not None else []
        self.seq = task.last_seq
        self.extra_started: dict[str, Any] = {
            "workspace": {"id": task.workspace_id, "name": task.workspace.name},
            "skill": task.skill,
            "client_msg_id": task.client_msg_id,
            "conversation": task.conversation_id,
        }
        self.finished = False  # task_finished is committed
        # The status the committed task_finished row carried (None until it committed). The row
        # set it unless the task had already ended otherwise, which the hook keeps too.
        self.final_written: str | None = None
        # The status stored once the end-of-run hook's work is done, read on its worker thread
        # (lifecycle.py): the runner returns it. None when no hook read it.
        self.stored_status: str | None = None
        resumable = task.mode in RESUMABLE_MODES or task.mode == "react"  # reaper.py resumes it
        self.immediate = DURABLE_STEPS if resumable else IMMEDIATE
        self.layer = get_channel_layer()
        self.window = (
            flush_interval_ms / 1000
            if flush_interval_ms is not None
            else flush_window_seconds(config)
        )
        self.flushes = 0  # transactions written (the benchmarks and tests read it)
        self.observer = None  # sees every event recorded: metrics, traces (ops/observe.py)
        self._queued: list[TaskEvent] = []
        self._lock = asyncio.Lock()
        self._last_flush = float("-inf")  # monotonic start of the last flush
        self._scheduled: asyncio.Task | None = None
        self._failure: BaseException | None = None
        self._inflight: tuple[asyncio.Future, list[TaskEvent]] | None = None
        self._publisher = None  # this loop's GroupPublisher (group_publish.py), on first use
        self._published = 0  # the last batch's ticket there

    async def record(self, kind: str, data: dict[str, Any], ts: datetime | None = None) -> dict:
        """Queue one event (written now when it is in IMMEDIATE); returns its message."""
        if self._failure is not None:  # a background write failed: the runner ends the task
            failure, self._failure = self._failure, None
            raise failure
        if kind == "task_started":
            data = {**data, **self.extra_started}
        data = scrub_event(kind, data, self.paths, self.secrets)
        self.seq += 1
        event = TaskEvent(
            task_id=self.task_id, seq=self.seq, type=kind, data=data, ts=ts or timezone.now()
        )
        event.message = message = event.as_message()  # made once: delivered as it is
        if self.observer is not None:
            self.observer.event(kind, data, event.ts)
        self._queued.append(event)
        if kind in self.immediate or len(self._queued) >= MAX_QUEUED:
            await self.flush()
            if kind == "task_finished":
                self.finished = True
                self.final_written = data.get("status")
        elif not (
            (kind in PACED or time.monotonic() - self._last_flush >= self.window)
            and self._start_now()
        ):
            self._schedule()
        return message

    async def flush(self) -> None:
        """Write and broadcast everything queued so far (waits for a write in flight). A write
        that fails is tried once more; then StorageFailed."""
        async with self._lock:
            try:
                await self._write_queued()
            except (asyncio.CancelledError, StorageFailed):
                raise
            except Exception as first:
                log.warning("writing events of task %s failed; trying once more", self.task_id)
                try:
                    await self._write_queued()  # the failed batch is back in front
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    raise StorageFailed(f"{type(exc).__name__}: {exc}") from first

    def abandon(self) -> None:
        """Storage failed for good: drop what is queued (the runner ends the task otherwise)."""
        self._queued = []
        self._inflight = None
        self._failure = None
        self.finished = True

    async def aclose(self) -> None:
        """Write what is still queued; the runner calls it in its `finally`. Shielded so that a
        second cancellation does not interrupt the write."""
        if self._queued or self._inflight is not None:
            await asyncio.shield(self.flush())
        if self._published:  # the last batches reach the channel layer too
            await asyncio.shield(self._publisher.wait_sent(self._published))
        scheduled, self._scheduled = self._scheduled, None
        if scheduled is not None and not scheduled.done():
            scheduled.cancel()  # nothing is queued: it was only waiting

    # ── internals ─────────────────────────────────────────────────────────────────────────────
    def _schedule(self) -> None:
        """Make sure a flush will run: now when the window since the last one is over, else at
        its end. One scheduled flush at a time; it re-arms itself while events keep coming."""
        if self._scheduled is None or self._scheduled.done():
            self._scheduled = asyncio.get_running_loop().create_task(
                self._flush_when_due(), name=f"events-{self.task_id}"
            )

    async def _flush_when_due(self) -> None:
        try:
            while self._queued:
                delay = self._last_flush + self.window - time.monotonic()
                if delay > 0 and self._queued[-1].type not in PACED:
                    await asyncio.sleep(delay)
                await self.flush()
        except Exception as exc:  # the events stay queued; the next record() raises
            log.exception("writing events of task %s failed", self.task_id)
            self._failure = exc

    def _start_now(self) -> bool:
        """A flush due now, started from record() itself when no flush holds the lock and the
        write in flight, if any, has committed: the writer thread has the batch before record()
        returns, two loop passes (a flush task's first step, the commit task's) sooner. Else
        False: a flush task does it (and settles a failed write)."""
        if self._lock.locked():
            return False
        if self._inflight is not None:
            future = self._inflight[0]
            if not future.done() or future.cancelled() or future.exception() is not None:
                return False
            self._inflight = None  # committed: what _settle() would do
        self._start_write()
        return True

    def _start_write(self) -> None:
        """Hand the queued events to the writer now; the rest of the flush runs as its own task:
        if a caller waiting for it is cancelled, the write still completes (never half-known),
        and the next flush waits for it first."""
        batch, self._queued = self._queued, []
        self._last_flush = time.monotonic()
        written = submit_events(self.task_id, batch)
        self._inflight = (asyncio.ensure_future(self._commit(batch, written)), batch, written)

    async def _write_queued(self) -> None:
        """Caller holds the lock. Commit the queued events in one transaction, then broadcast."""
        await self._settle()
        if not self._queued:
            return
        self._start_write()
        await self._settle()

    async def _settle(self) -> None:
        """Wait for the write in flight; a failed one puts its events back in front."""
        if self._inflight is None:
            return
        future, batch, written = self._inflight
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            if not future.done():
                raise  # this caller was cancelled; the write goes on and is settled later
            self._inflight = None
            # The commit's follow-up was cancelled (the loop shutting down): the writer thread
            # may have committed the rows all the same. Written again they would take their
            # seqs twice (IntegrityError); only rows it did not write go back in the queue.
            if await _committed(written):
                return
            self._queued[:0] = batch
            raise
        except Exception:
            self._inflight = None
            self._queued[:0] = batch  # rolled back: the next flush writes them again
            raise
        self._inflight = None

    async def _commit(self, batch: list[TaskEvent], written: asyncio.Future) -> None:
        # The process's writer thread commits it with the other tasks' waiting batches. Shielded:
        # if this task is cancelled, `written` still learns what the writer did (_settle).
        await asyncio.shield(written)
        self.flushes += 1
        messages = [event.message for event in batch]
        await deliver_local(self.task_id, messages)  # this process's sockets: at once
        # The channel layer (other processes' sockets), in order, off the flush path: queued
        # with the other tasks' batches of this loop.
        if self._publisher is None:
            self._publisher = group_publisher(self.layer)
        group = task_group(self.task_id)
        for start in range(0, len(messages), BROADCAST_MAX_EVENTS):
            chunk = messages[start : start + BROADCAST_MAX_EVENTS]
            self._published = self._publisher.publish(
                group, {"type": "task.events", "events": chunk}
            )


async def _committed(written: asyncio.Future) -> bool:
    """Whether the writer committed the batch of `written` (waits for its answer)."""
    try:
        await asyncio.shield(written)
    except asyncio.CancelledError:
        if written.cancelled():
            return False
        raise
    except Exception:
        return False
    return True
