"""The event writer's transaction runs a few statements however many rows and tasks it holds
(apps/tasks/events/event_writer.py `write_statements`): SQLite's driver lets go of the GIL around every
statement it runs, and each costs the writer a wait for the GIL while it holds the database's one
write lock. Counted here on SQLite's own trace of the statements it executes (an `executemany`
runs its statement once per row), on a real database file."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.utils import timezone

from apps.tasks.events.event_writer import persist_batches, write_statements
from apps.tasks.models import Task, TaskEvent
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db(transaction=True)


def tasks(tmp_path, count: int) -> list[Task]:
    user = make_user("writer")
    workspace = make_workspace("ws", tmp_path, user)
    return [make_task(user, workspace, goal=f"g{i}") for i in range(count)]


def event(task: Task, seq: int, kind: str = "token", **data) -> TaskEvent:
    return TaskEvent(task_id=task.pk, seq=seq, type=kind, data=data, ts=timezone.now())


def traced(batches) -> list[str]:
    """Persist `batches` in one transaction; the statements SQLite executed inside it."""
    connection.ensure_connection()
    executed: list[str] = []
    connection.connection.set_trace_callback(executed.append)
    try:
        with transaction.atomic():
            persist_batches(batches)
    finally:
        connection.connection.set_trace_callback(None)
    return [sql for sql in executed if sql.split()[0].upper() in ("INSERT", "UPDATE")]


def test_sixty_rows_of_twelve_tasks_with_starts_and_ends_take_three_statements(tmp_path):
    rows = tasks(tmp_path, 12)
    batches = []
    for index, task in enumerate(rows):
        batch = [event(task, seq, text=f"{task.pk}:{seq}") for seq in range(1, 6)]
        if index < 4:
            batch[0] = event(task, 1, "task_started", mode="react", goal=task.goal)
        if index >= 9:
            batch[-1] = event(task, 5, "task_finished", status="completed", final=f"answer {index}")
        batches.append((task.pk, batch))

    executed = traced(batches)

    assert len(executed) == 3, executed  # the rows; last_seq with the starts; the ends
    for index, task in enumerate(rows):
        stored = Task.objects.get(pk=task.pk)
        assert stored.last_seq == 5
        expected = "running" if index < 4 else "completed" if index >= 9 else "queued"
        assert stored.status == expected
        assert (stored.started_at is not None) == (index < 4)
        assert stored.result == (f"answer {index}" if index >= 9 else "")
        seqs = list(TaskEvent.objects.filter(task=task).order_by("seq").values_list("seq", "data"))
        assert [seq for seq, _ in seqs] == [1, 2, 3, 4, 5]
        assert seqs[2][1] == {"text": f"{task.pk}:3"}


def test_more_rows_and_tasks_than_one_statement_may_carry_are_all_written(tmp_path):
    """SQLite allows Django 999 parameters a statement: 5 per row, 3 per task's last_seq."""
    rows = tasks(tmp_path, 400)
    batches = [(task.pk, [event(task, 1), event(task, 2, text="x")]) for task in rows]

    statements = write_statements(batches)
    assert all(len(params) <= connection.features.max_query_params for _, params in statements)
    executed = traced(batches)

    assert len(executed) == len(statements) == 7  # 800 rows: 199 a statement; 400 tasks: 333
    assert TaskEvent.objects.filter(task__in=rows).count() == 800
    assert set(
        Task.objects.filter(pk__in=[t.pk for t in rows]).values_list("last_seq", flat=True)
    ) == {2}


def test_an_end_never_overwrites_a_final_status_already_stored(tmp_path):
    cancelled, running = tasks(tmp_path, 2)
    Task.objects.filter(pk=cancelled.pk).update(status="cancelled")
    Task.objects.filter(pk=running.pk).update(status="running")
    ended = [
        event(t, 1, "task_finished", status="completed", final="done") for t in (cancelled, running)
    ]

    persist_batches([(cancelled.pk, [ended[0]]), (running.pk, [ended[1]])])

    by_pk = {
        t.pk: (t.status, t.last_seq) for t in Task.objects.filter(pk__in=[cancelled.pk, running.pk])
    }
    assert by_pk == {cancelled.pk: ("cancelled", 1), running.pk: ("completed", 1)}


def test_the_writer_commits_promptly_once_a_held_write_lock_is_freed(tmp_path):
    """Another connection holds SQLite's write lock for 250 ms. SQLite's busy handler would
    have the writer sleep 100 ms at a time by then (its tries at ~228 and ~328 ms: ~78 ms after
    the release); the writer tries again every ~2 ms (event_writer.py `_commit`)."""
    import sqlite3
    import threading
    import time

    from apps.tasks.events.event_writer import EventWriter

    (task,) = tasks(tmp_path, 1)
    holder = sqlite3.connect(
        connection.settings_dict["NAME"], isolation_level=None, check_same_thread=False
    )
    holder.execute("BEGIN IMMEDIATE")
    writer = EventWriter()
    submitted = time.monotonic()
    future = writer.submit(task.pk, [event(task, 1)])
    released = threading.Event()

    def release_later():
        time.sleep(0.25)
        holder.execute("COMMIT")
        released.set()
        release_later.at = time.monotonic()

    threading.Thread(target=release_later).start()
    future.result(timeout=20)
    committed = time.monotonic()
    assert released.is_set()
    assert committed - release_later.at < 0.06, (
        committed - submitted,
        release_later.at - submitted,
    )
    assert Task.objects.get(pk=task.pk).last_seq == 1
    holder.close()


def test_a_write_lock_held_past_the_timeout_fails_the_write_and_the_next_one_succeeds(
    tmp_path, monkeypatch
):
    """The writer's tries end at the connection's `timeout` with SQLite's own error, as its
    busy handler's wait did; nothing of the batch is stored, and the writer goes on."""
    import sqlite3

    from django.db import OperationalError

    from apps.tasks.events.event_writer import EventWriter

    (task,) = tasks(tmp_path, 1)
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 0.3)
    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    writer = EventWriter()
    with pytest.raises(OperationalError, match="locked"):
        writer.submit(task.pk, [event(task, 1)]).result(timeout=10)
    holder.execute("ROLLBACK")
    holder.close()
    assert not TaskEvent.objects.filter(task=task).exists()
    writer.submit(task.pk, [event(task, 1)]).result(timeout=10)
    assert Task.objects.get(pk=task.pk).last_seq == 1
