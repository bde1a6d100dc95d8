"""One writer thread per process for `TaskEvent` rows (recorder.py hands it each flush's batch).

Every task's recorder submits a batch (its events of one flush window) and awaits the result. The
writer takes every batch waiting at that moment, from all tasks, and commits them in ONE
transaction (`bulk_create` + each task's `last_seq`), so 50 concurrent tasks make a few
transactions a window instead of queueing 50 writers on the database lock (SQLite has one writer
at a time anyway) or on the shared thread pool that also serves requests. A batch that cannot be
written together with the others (a seq already taken, a broken row) is retried alone, so it
fails only its own task.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from concurrent.futures import Future

from django.db import connection, transaction

from apps.tasks.models import FINAL_STATUSES, Task, TaskEvent, TaskStatus

log = logging.getLogger(__name__)

MAX_EVENTS_PER_TRANSACTION = 2000

_Item = tuple[int, list[TaskEvent], Future]


class EventWriter:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="agentkit-event-writer", daemon=True)
        self._thread.start()
        self.transactions = 0  # committed (tests and benchmarks read it)

    def submit(self, task_id: int, events: list[TaskEvent]) -> Future:
        future: Future = Future()
        self._queue.put((task_id, events, future))
        return future

    def _run(self) -> None:
        while True:
            items = [self._queue.get()]
            size = len(items[0][1])
            while size < MAX_EVENTS_PER_TRANSACTION:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                items.append(item)
                size += len(item[1])
            self._write(items)

    def _write(self, items: list[_Item]) -> None:
        try:
            with transaction.atomic():
                persist_batches([(task_id, events) for task_id, events, _ in items])
        except Exception as exc:
            if not connection.is_usable():
                connection.close()  # reconnect at the next write
            if len(items) == 1:
                self._settle(items, exc)
                return
            for item in items:  # one bad batch must not fail the other tasks' events
                self._write([item])
            return
        self.transactions += 1
        self._settle(items)

    @staticmethod
    def _settle(items: list[_Item], exc: BaseException | None = None) -> None:
        for _, _, future in items:
            if not future.set_running_or_notify_cancel():
                continue
            if exc is None:
                future.set_result(None)
            else:
                future.set_exception(exc)


def persist_batches(batches: list[tuple[int, list[TaskEvent]]]) -> None:
    """Inside the caller's transaction: the rows of every batch in one INSERT, then each task's
    `last_seq` in one statement (and `running` with `started_at` for a batch that holds
    task_started; the final status, answer, usage and cost for one that holds task_finished, so a
    client told of the end finds the task ended — and one that sees the task ended finds the
    event; the runner's lifecycle hook then adds what no event carries: the failure's salvage and
    own text, the spec's end, evolution). Per-batch ORM statements made the writer the
    bottleneck of 50 streaming tasks (two statements a batch, a batch per task per flush
    window)."""
    TaskEvent.objects.bulk_create([event for _, events in batches for event in events])
    last_seqs: dict[int, int] = {}
    for task_id, events in batches:
        last_seqs[task_id] = max(last_seqs.get(task_id, 0), events[-1].seq)
        started = next((e for e in events if e.type == "task_started"), None)
        if started is not None:
            Task.objects.filter(pk=task_id).update(status=TaskStatus.RUNNING, started_at=started.ts)
        finished = next((e for e in events if e.type == "task_finished"), None)
        if finished is not None and finished.data.get("status") in TaskStatus.values:
            _store_final_status(task_id, finished)
    table, pk = Task._meta.db_table, Task._meta.pk.column
    column = Task._meta.get_field("last_seq").column
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {qn(table)} SET {qn(column)} = %s WHERE {qn(pk)} = %s",
            [(seq, task_id) for task_id, seq in last_seqs.items()],
        )


_writer: EventWriter | None = None
_writer_pid: int | None = None
_writer_lock = threading.Lock()


def event_writer() -> EventWriter:
    """This process's writer (started on first use; a forked child starts its own)."""
    global _writer, _writer_pid
    with _writer_lock:
        if _writer is None or _writer_pid != os.getpid():
            _writer, _writer_pid = EventWriter(), os.getpid()
        return _writer


async def write_events(task_id: int, events: list[TaskEvent]) -> None:
    """Commit one task's batch (with whatever other tasks submitted meanwhile) and return once
    it is committed; raises what the write raised."""
    await asyncio.wrap_future(event_writer().submit(task_id, events))


def _store_final_status(task_id: int, finished: TaskEvent) -> None:
    data = finished.data
    Task.objects.filter(pk=task_id).exclude(status__in=FINAL_STATUSES).update(
        status=data["status"],
        result=data.get("final") or "",
        error=data.get("error"),
        usage=data.get("usage") or {},
        cost=data.get("cost") or 0.0,
        finished_at=finished.ts,
    )
