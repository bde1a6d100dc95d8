"""Waiting never holds a worker (issue 41), on a real Redis and RQ's own worker: a run whose
workspace is held by another task's live run goes back to the queue (its task stays `queued`,
deferred behind the holder, with one `task_waiting` that names it) and the worker takes the next
job at once; the holder's end queues the deferred tasks' next jobs — `task-<id>-2` — oldest
first, and they then run in the order their tasks were created."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY
from rq import SimpleWorker

from apps.tasks.dispatch.deferral import wake_behind
from apps.tasks.dispatch.leases import lease_key
from apps.tasks.events.ending import task_end_now
from apps.tasks.models import Task, WorkspaceLease
from apps.tasks.run.executors import task_submit
from apps.tasks.run.reaper import reap
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task, make_workspace
from tests.tasks.test_queued_event import rq_queue  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def holding(user, workspace) -> Task:
    """A task whose live run (another worker) holds the workspace."""
    holder = make_task(user, workspace, goal="the long one")
    Task.objects.filter(pk=holder.pk).update(
        status="running", run_owner="elsewhere:1:abc", heartbeat_at=timezone.now()
    )
    WorkspaceLease.objects.create(workspace=workspace, task=holder, key=lease_key(holder))
    return holder


def runs(outcome: str) -> float:
    return (
        REGISTRY.get_sample_value("agentkit_runs_total", {"mode": "react", "outcome": outcome}) or 0
    )


def burst(queue) -> float:
    began = time.monotonic()
    SimpleWorker([queue], connection=queue.connection).work(burst=True)
    return time.monotonic() - began


def test_a_run_that_must_wait_goes_back_to_the_queue_and_frees_its_worker(
    demo,
    rq_queue,  # noqa: F811
    tmp_path,
):
    user, busy, _ = demo
    other_root = tmp_path / "other"
    other_root.mkdir()
    other = make_workspace("other", other_root, user)
    holder = holding(user, busy)
    first = make_task(user, busy, goal="first behind")
    second = make_task(user, busy, goal="second behind")
    elsewhere = make_task(user, other, goal="hello elsewhere", mode="direct_chat")
    for task in (first, second, elsewhere):
        task_submit(task_id=task.pk)
    deferred_runs = runs("deferred")

    took = burst(rq_queue)  # one worker: it would wait forever for the holder before issue 41

    assert took < 30
    assert rq_queue.count == 0  # nothing waits in a worker or on the queue
    assert Task.objects.get(pk=elsewhere.pk).status == "completed"
    for task in (first, second):
        now = Task.objects.get(pk=task.pk)
        assert (now.status, now.run_owner, now.deferred_behind_id) == ("queued", "", holder.pk)
        waits = [e.data for e in events_of(task) if e.type == "task_waiting"]
        assert [w["waiting_for"] for w in waits if w["waiting_for"]] == [holder.pk]
    assert reap() == []  # deferred behind a live run: no orphan
    assert runs("deferred") - deferred_runs == 2  # what /metrics tells an operator

    # The holder ends: the deferred tasks get their second jobs, oldest first.
    assert task_end_now(holder.pk, "completed")
    assert rq_queue.job_ids == [f"task-{first.pk}-2", f"task-{second.pk}-2"]
    burst(rq_queue)
    done = [Task.objects.get(pk=task.pk) for task in (first, second)]
    assert [task.status for task in done] == ["completed", "completed"]
    assert done[0].started_at < done[1].started_at  # in the order they were created
    for task in done:
        kinds = [event.type for event in events_of(task)]
        assert kinds.count("task_started") == 1 and kinds[-1] == "task_finished", kinds
        assert [e.seq for e in events_of(task)] == list(range(1, len(kinds) + 1))


def test_a_later_task_does_not_overtake_a_deferred_one(demo, rq_queue):  # noqa: F811
    user, busy, _ = demo
    holder = holding(user, busy)
    first = make_task(user, busy, goal="first behind")
    task_submit(task_id=first.pk)
    burst(rq_queue)
    assert Task.objects.get(pk=first.pk).deferred_behind_id == holder.pk
    # The holder's run ends and gives the workspace back, but its waking of `first` is lost:
    # a task created now must still wait for `first`.
    Task.objects.filter(pk=holder.pk).update(status="completed", run_owner="")
    WorkspaceLease.objects.all().delete()
    later = make_task(user, busy, goal="later")
    task_submit(task_id=later.pk)
    burst(rq_queue)
    assert Task.objects.get(pk=later.pk).deferred_behind_id == first.pk
    # The reaper wakes what nothing would wake any more; then both run, in order.
    assert {task_id: what for task_id, what, _ in reap()} == {first.pk: "woken"}
    burst(rq_queue)
    assert Task.objects.get(pk=first.pk).status == "completed"
    assert wake_behind(first.pk) == []  # its end woke `later` already
    burst(rq_queue)
    done = [Task.objects.get(pk=task.pk) for task in (first, later)]
    assert [task.status for task in done] == ["completed", "completed"]
    assert done[0].finished_at <= done[1].started_at


def test_a_turn_waits_for_its_conversations_earlier_turn_in_the_queue_not_in_a_worker(
    demo,
    rq_queue,  # noqa: F811
):
    from apps.tasks.models import Conversation

    user, workspace, _ = demo
    chat = Conversation.objects.create(user=user, workspace=workspace)
    earlier = make_task(user, workspace, goal="hello", mode="direct_chat", conversation=chat)
    Task.objects.filter(pk=earlier.pk).update(
        status="running", run_owner="elsewhere:1:abc", heartbeat_at=timezone.now()
    )
    later = make_task(user, workspace, goal="hello again", mode="direct_chat", conversation=chat)
    task_submit(task_id=later.pk)

    assert burst(rq_queue) < 30
    now = Task.objects.get(pk=later.pk)
    assert (now.status, now.deferred_behind_id) == ("queued", earlier.pk)
    waits = [e.data["reason"] for e in events_of(later) if e.type == "task_waiting"]
    turn = f"waiting for the conversation's earlier turn (task #{earlier.pk})"
    assert waits == ["waiting for a free worker", turn]

    assert task_end_now(earlier.pk, "completed")
    assert rq_queue.job_ids == [f"task-{later.pk}-2"]
    burst(rq_queue)
    assert Task.objects.get(pk=later.pk).status == "completed"
