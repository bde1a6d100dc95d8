"""One writer thread per process for `TaskEvent` rows (recorder.py hands it each flush's batch).

Every task's recorder submits a batch (its events of one flush window) and awaits the result. The
writer takes every batch waiting at that moment, from all tasks, and commits them in ONE
transaction (the rows + each task's `last_seq`), so 50 concurrent tasks make a few
transactions a window instead of queueing 50 writers on the database lock (SQLite has one writer
at a time anyway) or on the shared thread pool that also serves requests. A batch that cannot be
written together with the others (a seq already taken, a broken row) is retried alone, so it
fails only its own task.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import queue
import threading
from concurrent.futures import Future

from django.db import connection, transaction

from apps.tasks.models import FINAL_STATUSES, Task, TaskEvent, TaskStatus

log = logging.getLogger(__name__)

MAX_EVENTS_PER_TRANSACTION = 2000

_Item = tuple[int, list[TaskEvent], "Future | asyncio.Future"]


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

    def submit_on_loop(self, task_id: int, events: list[TaskEvent]) -> asyncio.Future:
        """As `submit`, for a caller on an event loop: an asyncio future, resolved with the
        other batches of its loop that the transaction committed by ONE thread-safe call (one
        wake-up of the loop, not one per batch, nor a thread-safe future per batch)."""
        future = asyncio.get_running_loop().create_future()
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
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future]] = {}
        for _, _, future in items:
            if isinstance(future, asyncio.Future):
                by_loop.setdefault(future.get_loop(), []).append(future)
                continue
            if not future.set_running_or_notify_cancel():
                continue
            if exc is None:
                future.set_result(None)
            else:
                future.set_exception(exc)
        for loop, futures in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, futures, exc)
            except RuntimeError:  # the loop closed: nobody waits any more
                log.debug("event loop closed before its %d batches were settled", len(futures))


def _resolve(futures: list[asyncio.Future], exc: BaseException | None) -> None:
    for future in futures:
        if future.done():  # its waiter was cancelled; the rows are written all the same
            continue
        if exc is None:
            future.set_result(None)
        else:
            future.set_exception(exc)


def persist_batches(batches: list[tuple[int, list[TaskEvent]]]) -> None:
    """Inside the caller's transaction: the rows of every batch in one prepared INSERT, then
    each task's `last_seq` in one statement (and `running` with `started_at` for a batch that
    holds task_started; the final status, answer, usage and cost for one that holds
    task_finished, so a client told of the end finds the task ended — and one that sees the task
    ended finds the event; the runner's lifecycle hook then adds what no event carries: the
    failure's salvage and own text, the spec's end, evolution). Per-batch ORM statements made the
    writer the bottleneck of 50 streaming tasks (two statements a batch, a batch per task per
    flush window); the statements are built once and take values the way the ORM's fields
    prepare them (`get_db_prep_save`), without its per-query compilation: 50 tasks that end
    together no longer hold the other tasks' token batches behind 50 ORM updates."""
    started, finished, last_seqs = [], [], {}
    events = []
    for task_id, batch in batches:
        events.extend(batch)
        last_seqs[task_id] = max(last_seqs.get(task_id, 0), batch[-1].seq)
        for event in batch:
            if event.type == "task_started":
                started.append((TaskStatus.RUNNING, event.ts, task_id))
            elif event.type == "task_finished" and event.data.get("status") in TaskStatus.values:
                finished.append(_final_status_row(task_id, event))
    with connection.cursor() as cursor:
        cursor.executemany(_sql("insert"), [_event_row(event) for event in events])
        if started:
            cursor.executemany(_sql("started"), [_prepared(_STARTED, row) for row in started])
        if finished:
            cursor.executemany(_sql("finished"), finished)
        cursor.executemany(_sql("last_seq"), [(seq, task) for task, seq in last_seqs.items()])


_EVENT_FIELDS = ("task", "seq", "type", "data", "ts")
_STARTED = ("status", "started_at")
_FINAL = ("status", "result", "error", "usage", "cost", "finished_at")


def _field(model, name: str):
    return model._meta.get_field(name)


@functools.cache
def _event_fields() -> tuple:
    return tuple(_field(TaskEvent, name) for name in _EVENT_FIELDS)


def _event_row(event: TaskEvent) -> tuple:
    return tuple(
        field.get_db_prep_save(getattr(event, field.attname), connection)
        for field in _event_fields()
    )


def _prepared(names: tuple[str, ...], row: tuple) -> tuple:
    """`row`: the values of `names`, then the task's id."""
    values = [
        _field(Task, name).get_db_prep_save(value, connection)
        for name, value in zip(names, row[:-1], strict=True)
    ]
    return (*values, row[-1])


def _final_status_row(task_id: int, finished: TaskEvent) -> tuple:
    data = finished.data
    values = (
        data["status"],
        data.get("final") or "",
        data.get("error"),
        data.get("usage") or {},
        data.get("cost") or 0.0,
        finished.ts,
    )
    return (*_prepared(_FINAL, (*values, task_id)), *sorted(FINAL_STATUSES))


@functools.cache
def _sql_for(vendor: str, kind: str) -> str:
    qn = connection.ops.quote_name
    task, pk = qn(Task._meta.db_table), qn(Task._meta.pk.column)
    if kind == "insert":
        columns = ", ".join(qn(_field(TaskEvent, name).column) for name in _EVENT_FIELDS)
        marks = ", ".join(["%s"] * len(_EVENT_FIELDS))
        return f"INSERT INTO {qn(TaskEvent._meta.db_table)} ({columns}) VALUES ({marks})"
    if kind == "last_seq":
        return f"UPDATE {task} SET {qn(_field(Task, 'last_seq').column)} = %s WHERE {pk} = %s"
    names = _STARTED if kind == "started" else _FINAL
    sets = ", ".join(f"{qn(_field(Task, name).column)} = %s" for name in names)
    sql = f"UPDATE {task} SET {sets} WHERE {pk} = %s"
    if kind == "finished":  # never over a final status already stored (a cancel, say)
        status = qn(_field(Task, "status").column)
        sql += f" AND {status} NOT IN ({', '.join(['%s'] * len(FINAL_STATUSES))})"
    return sql


def _sql(kind: str) -> str:
    return _sql_for(connection.vendor, kind)


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


def submit_events(task_id: int, events: list[TaskEvent]) -> asyncio.Future:
    """Hand one task's batch to the writer thread now (from a loop); the future resolves once it
    is committed (or with what the write raised)."""
    return event_writer().submit_on_loop(task_id, events)


async def write_events(task_id: int, events: list[TaskEvent]) -> None:
    """Commit one task's batch (with whatever other tasks submitted meanwhile) and return once
    it is committed; raises what the write raised."""
    await submit_events(task_id, events)
