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
import sqlite3
import threading
import time
from concurrent.futures import Future

from django.db import OperationalError, connection, transaction

from apps.tasks.models import FINAL_STATUSES, Task, TaskEvent, TaskStatus

log = logging.getLogger(__name__)

MAX_EVENTS_PER_TRANSACTION = 2000
BUSY_TIMEOUT_MS = 2  # SQLite: the writer's own wait for a taken write lock, per try
LOCK_POLL_SECONDS = 0.0005  # between tries

_Item = tuple[int, list[TaskEvent], "Future | asyncio.Future"]


class EventWriter:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="agentkit-event-writer", daemon=True)
        self._thread.start()
        self.transactions = 0  # committed (tests and benchmarks read it)
        self._polling = None  # the SQLite connection whose busy timeout was shortened

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
            # Built before the transaction: the write lock is held for the statements alone.
            statements = write_statements([(task_id, events) for task_id, events, _ in items])
            self._commit(statements)
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

    def _commit(self, statements: list[tuple[str, list]]) -> None:
        """Run `statements` in one transaction. SQLite: the database's write lock is waited for
        by trying again every ~millisecond (`_poll_write_lock`), up to the connection's
        `timeout`, not in SQLite's busy handler: that one sleeps 1, 2, 5 … 100 ms between tries
        and does not wake when the lock is freed, so a writer that met a task creation's
        transaction (a few ms) slept up to ~100 ms more — and every socket's next frame waits
        for this commit (bench/streaming.py)."""
        deadline = None
        while True:
            try:
                self._poll_write_lock()
                with transaction.atomic():
                    run_statements(statements)
                return
            except OperationalError as exc:
                if not _locked(exc):
                    raise
                now = time.monotonic()
                deadline = deadline or now + _lock_timeout()
                if now >= deadline:
                    raise
                time.sleep(LOCK_POLL_SECONDS)

    def _poll_write_lock(self) -> None:
        """SQLite: this thread's connection gives up on a taken lock after ~2 ms (SQLite's
        busy handler: sleep 1 ms, then 1 ms) instead of the configured wait; `_commit` tries
        again. Its only statements run in its own IMMEDIATE transactions, which hold the lock
        from BEGIN on: only BEGIN meets a taken lock (WAL: readers never block a commit)."""
        if connection.vendor != "sqlite":
            return
        connection.ensure_connection()
        if connection.connection is not self._polling:
            with connection.cursor() as cursor:
                cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._polling = connection.connection

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


def _locked(exc: OperationalError) -> bool:
    """SQLite's "database is locked" (SQLITE_BUSY): the write lock is taken."""
    cause = exc.__cause__
    return (getattr(cause, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_BUSY  # and its kinds


def _lock_timeout() -> float:
    return float(connection.settings_dict.get("OPTIONS", {}).get("timeout", 5))


def persist_batches(batches: list[tuple[int, list[TaskEvent]]]) -> None:
    """Inside the caller's transaction: write `batches` (see `write_statements`)."""
    run_statements(write_statements(batches))


def run_statements(statements: list[tuple[str, list]]) -> None:
    with connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)


def write_statements(batches: list[tuple[int, list[TaskEvent]]]) -> list[tuple[str, list]]:
    """The statements that write `batches`, their values prepared (the caller runs them in one
    transaction, `run_statements`): every batch's rows in one multi-row INSERT, then one UPDATE
    for every task's `last_seq` (and `running` with `started_at` for a task whose batch holds
    task_started), and one for the final status, answer, usage and cost of the tasks whose batch
    holds task_finished — so a client told of the end finds the task ended, and one that sees
    the task ended finds the event; the runner's lifecycle hook then adds what no event carries:
    the failure's salvage and own text, the spec's end, evolution.

    Why so few statements, built before the transaction. SQLite's driver lets go of the GIL
    around every statement it steps (every row of an `executemany`) and must get it back
    after: while the serving loop's thread computes, each costs up to the interpreter's switch
    interval. Inside a transaction that is time the database's one write lock is held: 50 rows
    written one by one held it ~40 ms with one busy thread beside them, one multi-row statement
    ~3 ms (bench/README.md, chat_load), and every task creation and other write waited on
    SQLite's busy handler meanwhile. The values are
    prepared the way the ORM's fields prepare them (`get_db_prep_save`), without its per-query
    compilation, and before the lock is taken."""
    events: list[TaskEvent] = []
    last_seqs: dict[int, int] = {}
    started: dict[int, tuple] = {}
    finished: dict[int, tuple] = {}
    for task_id, batch in batches:
        events.extend(batch)
        last_seqs[task_id] = max(last_seqs.get(task_id, 0), batch[-1].seq)
        for event in batch:
            if event.type == "task_started":
                started[task_id] = _prepared(_STARTED, (TaskStatus.RUNNING, event.ts))
            elif event.type == "task_finished" and event.data.get("status") in TaskStatus.values:
                finished[task_id] = _final_status_values(event)
    statements = []
    rows = [_event_row(event) for event in events]
    for chunk in _chunks(rows, _rows_per_statement(len(_EVENT_FIELDS))):
        statements.append((_insert_sql(len(chunk)), [value for row in chunk for value in row]))
    columns = {"last_seq": {task: (seq,) for task, seq in last_seqs.items()}}
    if started:
        columns["started"] = started
    statements.extend(_updates(columns))
    if finished:
        statements.extend(_updates({"finished": finished}, final=True))
    return statements


_EVENT_FIELDS = ("task", "seq", "type", "data", "ts")
_STARTED = ("status", "started_at")
_FINAL = ("status", "result", "error", "usage", "cost", "outcome", "finished_at")
_UPDATED = {"last_seq": ("last_seq",), "started": _STARTED, "finished": _FINAL}


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


def _prepared(names: tuple[str, ...], values: tuple) -> tuple:
    return tuple(
        _field(Task, name).get_db_prep_save(value, connection)
        for name, value in zip(names, values, strict=True)
    )


def _final_status_values(finished: TaskEvent) -> tuple:
    """The task's final status, result, error, usage, cost and end from its task_finished
    event. An answer the engine cut for the event (over limits.answer_chars: `final_truncated`)
    comes whole in `final_full`: taken out of the data here, before the row is written and the
    event broadcast (the message holds the same dict), kept on the event for a retried write,
    and stored as the result — the one full copy."""
    data = finished.data
    if "final_full" in data:
        finished.full_final = data.pop("final_full")
    values = (
        data["status"],
        getattr(finished, "full_final", None) or data.get("final") or "",
        data.get("error"),
        data.get("usage") or {},
        data.get("cost") or 0.0,
        str(data.get("outcome") or "")[:64],
        finished.ts,
    )
    return _prepared(_FINAL, values)


def _rows_per_statement(values_per_row: int, fixed: int = 0) -> int:
    """How many rows one statement may carry within the backend's limit on parameters (`fixed`:
    the statement's parameters that are not per row)."""
    limit = connection.features.max_query_params
    return max(1, (limit - fixed) // values_per_row) if limit else 1000


def _chunks(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _updates(groups: dict[str, dict[int, tuple]], *, final: bool = False):
    """UPDATE statements that set, per task, the columns of each group in `groups` (a task
    missing from a group keeps those columns): `col = CASE pk WHEN %s THEN %s … ELSE col END`,
    as many tasks in one statement as the backend's parameter limit allows. `final`: never over
    a final status already stored (a cancel, say)."""
    qn = connection.ops.quote_name
    pk = qn(Task._meta.pk.column)
    tasks = sorted({task for group in groups.values() for task in group})
    width = sum(2 * len(_UPDATED[name]) for name in groups) + 1  # CASE pairs, the IN list
    size = _rows_per_statement(width, len(FINAL_STATUSES) if final else 0)
    for chunk in _chunks(tasks, size):
        sets, params = [], []
        for name, values in groups.items():
            members = [task for task in chunk if task in values]
            if not members:
                continue
            for index, field_name in enumerate(_UPDATED[name]):
                column = qn(_field(Task, field_name).column)
                whens = " ".join(["WHEN %s THEN %s"] * len(members))
                sets.append(f"{column} = CASE {pk} {whens} ELSE {column} END")
                for task in members:
                    params += (task, values[task][index])
        marks = ", ".join(["%s"] * len(chunk))
        sql = f"UPDATE {qn(Task._meta.db_table)} SET {', '.join(sets)} WHERE {pk} IN ({marks})"
        params += chunk
        if final:
            status = qn(_field(Task, "status").column)
            sql += f" AND {status} NOT IN ({', '.join(['%s'] * len(FINAL_STATUSES))})"
            params += sorted(FINAL_STATUSES)
        yield sql, params


@functools.lru_cache(maxsize=64)
def _insert_sql_for(vendor: str, rows: int) -> str:
    qn = connection.ops.quote_name
    columns = ", ".join(qn(_field(TaskEvent, name).column) for name in _EVENT_FIELDS)
    row = f"({', '.join(['%s'] * len(_EVENT_FIELDS))})"
    values = ", ".join([row] * rows)
    return f"INSERT INTO {qn(TaskEvent._meta.db_table)} ({columns}) VALUES {values}"


def _insert_sql(rows: int) -> str:
    return _insert_sql_for(connection.vendor, rows)


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
