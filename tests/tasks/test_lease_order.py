"""Tasks the reaper hands over keep their place in the workspace's queue (apps/tasks/dispatch/leases.py:
waiting runs take the lease in the order their tasks were created).

A react task whose run died is `running`; the reaper hands it to a new run (reaper.py: no owner,
a fresh heartbeat), and that run claims it, then asks for the workspace. A later task of the
same workspace — here a plan_exec task restarted by the same reaper round, whose run may ask
first when its thread is scheduled first (a loaded machine) — must wait for it: it plans, then
holds the workspace while its spec awaits a review (up to `spec_review.timeout_seconds`), so
taking the lease first left the earlier task `running` with nothing running it for that long.
Real SQLite, the real runner, the scripted model."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.tasks.dispatch.leases import Waiting, lease_acquire, lease_release
from apps.tasks.dispatch.liveness import run_claim, run_release
from apps.tasks.models import Task, TaskStatus, WorkspaceLease
from apps.tasks.run.runner import run_task
from apps.tasks.services import task_request_cancel
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)

LONG_AGO = timedelta(minutes=5)
TAKEN_OVER = "taken over automatically (test)"


def dead(task: Task) -> Task:
    """As a run whose process died minutes ago leaves it."""
    Task.objects.filter(pk=task.pk).update(
        status=TaskStatus.RUNNING,
        run_owner="gone-host:1:run",
        heartbeat_at=timezone.now() - LONG_AGO,
    )
    return Task.objects.get(pk=task.pk)


def handed_over(task: Task) -> Task:
    """As the reaper's hand-over leaves a dead run's task: no owner, a fresh heartbeat."""
    Task.objects.filter(pk=task.pk).update(run_owner="", heartbeat_at=timezone.now())
    return Task.objects.get(pk=task.pk)


def test_a_handed_over_task_keeps_its_place_before_later_tasks_of_the_workspace(demo):
    user, workspace, _ = demo
    earlier = handed_over(dead(make_task(user, workspace, goal="r")))
    later = make_task(user, workspace, goal="p", mode="plan_exec")
    later_claim = run_claim(later.pk)
    try:
        # handed over, its new run not started yet: the later run waits for it
        assert lease_acquire(task_id=later.pk, workspace_id=workspace.pk) == Waiting(earlier.pk)
        claim = run_claim(earlier.pk)
        try:
            # its new run claimed it (still `running`, as its dead run left it): still first
            assert Task.objects.get(pk=earlier.pk).status == TaskStatus.RUNNING
            waiting = lease_acquire(task_id=later.pk, workspace_id=workspace.pk)
            assert waiting == Waiting(earlier.pk)
            assert lease_acquire(task_id=earlier.pk, workspace_id=workspace.pk) is None
            assert lease_acquire(task_id=later.pk, workspace_id=workspace.pk) == waiting
            lease_release(task_id=earlier.pk, workspace_id=workspace.pk)
        finally:
            run_release(earlier.pk, claim)
        Task.objects.filter(pk=earlier.pk).update(status=TaskStatus.COMPLETED)
        assert lease_acquire(task_id=later.pk, workspace_id=workspace.pk) is None
    finally:
        run_release(later.pk, later_claim)


def test_a_handed_over_task_whose_new_run_never_came_does_not_block_the_workspace(demo):
    """The hand-over keeps its place only while its heartbeat is fresh (orphan_after_seconds):
    a new run that never came (its worker died too) blocks nobody after that."""
    user, workspace, _ = demo
    earlier = handed_over(dead(make_task(user, workspace, goal="r")))
    Task.objects.filter(pk=earlier.pk).update(heartbeat_at=timezone.now() - LONG_AGO)
    later = make_task(user, workspace, goal="p")
    claim = run_claim(later.pk)
    try:
        assert lease_acquire(task_id=later.pk, workspace_id=workspace.pk) is None
    finally:
        run_release(later.pk, claim)


def _run_in_thread(task_id: int, reason: str | None) -> threading.Thread:
    """As the inline executor runs a task outside a server: a thread with its own loop."""
    thread = threading.Thread(
        target=lambda: asyncio.run(run_task(task_id, resume_reason=reason)), daemon=True
    )
    thread.start()
    return thread


def _wait_status(task_id: int, statuses: set[str], timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while (status := Task.objects.get(pk=task_id).status) not in statuses:
        assert time.monotonic() < deadline, f"task {task_id} stayed {status}"
        time.sleep(0.05)
    return status


def test_the_later_task_s_run_asking_first_still_lets_the_earlier_one_run_first(demo):
    """Both tasks handed over in one reaper round; the later one's run is scheduled first."""
    user, workspace, _ = demo
    react = dead(make_task(user, workspace, goal="r"))
    unplanned = dead(make_task(user, workspace, goal="p", mode="plan_exec"))
    react, unplanned = handed_over(react), handed_over(unplanned)
    later_run = _run_in_thread(unplanned.pk, None)
    deadline = time.monotonic() + 30
    while "task_waiting" not in [e.type for e in events_of(unplanned)]:
        assert WorkspaceLease.objects.filter(task_id=unplanned.pk).count() == 0, (
            "the later task took the workspace before the earlier one, handed over first"
        )
        assert time.monotonic() < deadline
        time.sleep(0.05)
    waiting = next(e for e in events_of(unplanned) if e.type == "task_waiting")
    assert waiting.data["waiting_for"] == react.pk
    earlier_run = _run_in_thread(react.pk, TAKEN_OVER)
    assert _wait_status(react.pk, {"completed", "failed", "cancelled"}) == "completed"
    earlier_run.join(30)
    resumed = [e.data for e in events_of(react) if e.type == "task_resumed"]
    assert len(resumed) == 1 and resumed[0]["reason"] == TAKEN_OVER
    # then the later one plans, and holds the workspace while its spec awaits review
    assert _wait_status(unplanned.pk, {"awaiting_review", "completed"}) in {
        "awaiting_review",
        "completed",
    }
    types = [e.type for e in events_of(unplanned)]
    assert types.index("task_waiting") < types.index("task_started")
    assert task_request_cancel(task=Task.objects.get(pk=unplanned.pk))
    later_run.join(30)
    assert not later_run.is_alive()
    assert Task.objects.get(pk=unplanned.pk).status == "cancelled"
