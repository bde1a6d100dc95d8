"""What the reaper does with each kind of task that has no live run (apps/tasks/run/reaper.py), on
real SQLite with the real runner and the scripted model: a task that never began is started
again; a cancel asked of a dead run ends it cancelled; a react task is resumed; a task
whose runs keep dying is not handed over forever; a live or recently queued task is left alone."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.tasks.dispatch.liveness import run_claim, run_release
from apps.tasks.models import Task
from apps.tasks.run.reaper import MAX_HANDOVERS, reap
from apps.tasks.services import task_request_cancel
from tests.tasks.conftest import events_of
from tests.tasks.factories import add_events, make_task

pytestmark = pytest.mark.django_db(transaction=True)

LONG_AGO = timedelta(minutes=5)


def dead(task: Task, **fields) -> Task:
    """As a run whose process died minutes ago leaves it."""
    Task.objects.filter(pk=task.pk).update(
        run_owner="gone-host:1:run", heartbeat_at=timezone.now() - LONG_AGO, **fields
    )
    return Task.objects.get(pk=task.pk)


def wait_final(task_id: int, timeout: float = 60) -> Task:
    deadline = time.monotonic() + timeout
    while not (task := Task.objects.get(pk=task_id)).is_finished:
        assert time.monotonic() < deadline, f"task {task_id} stayed {task.status}"
        time.sleep(0.1)
    return task


def test_each_kind_of_orphan_gets_what_it_needs_and_live_tasks_are_left_alone(demo):
    user, workspace, _ = demo
    never_started = make_task(user, workspace, goal="hello", mode="direct_chat")
    Task.objects.filter(pk=never_started.pk).update(created_at=timezone.now() - LONG_AGO)
    cancelled = dead(make_task(user, workspace, goal="c", status="running"))
    Task.objects.filter(pk=cancelled.pk).update(cancel_requested_at=timezone.now())
    react = dead(make_task(user, workspace, goal="r", status="running"))
    unplanned = dead(make_task(user, workspace, goal="p", mode="plan_exec", status="running"))
    just_queued = make_task(user, workspace, goal="new", mode="direct_chat")
    alive = make_task(user, workspace, goal="alive", status="running")
    claim = run_claim(alive.pk)
    try:
        done = {task_id: what for task_id, what, _ in reap()}
        assert done == {
            never_started.pk: "restarted",
            cancelled.pk: "cancelled",
            react.pk: "resumed",  # from its stored events (none here: from the start)
            unplanned.pk: "restarted",  # died before its spec was confirmed: planned again
        }
        assert wait_final(never_started.pk).status == "completed"  # it ran, once
        assert [e.type for e in events_of(never_started)].count("task_started") == 1
        assert Task.objects.get(pk=cancelled.pk).status == "cancelled"
        restarted = [e.data for e in events_of(unplanned) if e.type == "task_resumed"]
        assert len(restarted) == 1 and restarted[0]["restarted"] is True
        assert restarted[0]["reason"].startswith("taken over automatically")
        # its sockets learn why it begins again, then it plans anew, to its spec review
        assert events_of(unplanned)[0].type == "task_resumed"
        deadline = time.monotonic() + 60
        while (status := Task.objects.get(pk=unplanned.pk).status) in ("queued", "running"):
            assert time.monotonic() < deadline, status
            time.sleep(0.1)
        assert status in ("awaiting_review", "completed"), status
        assert "task_started" in [e.type for e in events_of(unplanned)]
        assert wait_final(react.pk).status == "completed"
        resumed = [e.data for e in events_of(react) if e.type == "task_resumed"]
        assert len(resumed) == 1 and resumed[0]["steps"] == 0
        assert resumed[0]["reason"].startswith("taken over automatically")
        assert Task.objects.get(pk=just_queued.pk).status == "queued"  # within its grace
        assert Task.objects.get(pk=alive.pk).status == "running"
        assert reap() == []  # exactly once
    finally:
        run_release(alive.pk, claim)
        # the planned task's run waits for its review in a thread of this process: end it
        if task_request_cancel(task=Task.objects.get(pk=unplanned.pk)):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not Task.objects.get(pk=unplanned.pk).is_finished:
                time.sleep(0.1)


def test_a_task_whose_runs_keep_dying_is_ended_after_a_few_hand_overs(demo):
    user, workspace, _ = demo
    task = dead(make_task(user, workspace, goal="q"), orphaned=MAX_HANDOVERS)  # queued
    assert [(what) for _, what, _ in reap()] == ["interrupted"]
    stored = Task.objects.get(pk=task.pk)
    assert (stored.status, stored.error["error_code"]) == ("failed", "interrupted")


def test_a_direct_chat_task_whose_run_died_mid_answer_answers_again(demo):
    """No tools, no changes: the answer a dead run was streaming is asked for again, once, and
    the task completes (it is not failed as interrupted)."""
    user, workspace, _ = demo
    task = make_task(user, workspace, goal="hello", mode="direct_chat", status="running")
    add_events(task, "task_started", "token")  # cut off in the middle of its answer
    task = dead(task)
    assert [(task_id, what) for task_id, what, _ in reap()] == [(task.pk, "resumed")]
    assert reap() == []  # exactly once
    assert wait_final(task.pk).status == "completed"
    events = events_of(task)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    resumed = [e.data for e in events if e.type == "task_resumed"]
    assert len(resumed) == 1 and resumed[0]["reason"].startswith("taken over automatically")
    assert [e.type for e in events].count("task_finished") == 1
    assert events[-1].type == "task_finished" and events[-1].data["status"] == "completed"
