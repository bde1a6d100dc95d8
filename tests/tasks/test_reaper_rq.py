"""The reaper with executor rq (apps/tasks/run/reaper.py), on a real Redis and RQ's own queue and
worker: a task whose job still waits in the queue is no dead run, however long it waits, nor one
a worker started a moment ago; but a worker SIGKILLed between taking a job and claiming its task
leaves RQ saying `started` (or `queued`, when it died taking the job off the queue) for an hour,
and that task must be started again by another worker now."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rq import SimpleWorker
from rq.job import Job

from apps.tasks.models import Task
from apps.tasks.run.executors import task_submit
from apps.tasks.run.reaper import reap
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task
from tests.tasks.test_queued_event import rq_queue  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)

LONG_AGO = timedelta(minutes=5)


def queued_long_ago(user, workspace, goal: str, queue) -> tuple[Task, Job]:
    """A direct_chat task submitted to the workers minutes ago, never claimed by a run."""
    task = make_task(user, workspace, goal=goal, mode="direct_chat")
    task_submit(task_id=task.pk)
    Task.objects.filter(pk=task.pk).update(created_at=timezone.now() - LONG_AGO)
    return Task.objects.get(pk=task.pk), Job.fetch(f"task-{task.pk}-1", connection=queue.connection)


def taken_by_a_worker(job: Job, queue, *, started_ago: timedelta) -> None:
    """As RQ's worker leaves a job it took off the queue and started (then it was SIGKILLed
    before the job's function claimed the task)."""
    queue.remove(job)
    with queue.connection.pipeline() as pipeline:
        job.prepare_for_execution("dead-worker", pipeline)
        pipeline.execute()
    job.started_at = timezone.now() - started_ago
    job.save()


def test_a_task_whose_worker_died_before_claiming_it_is_started_again(demo, rq_queue):  # noqa: F811
    user, workspace, _ = demo
    waiting, _ = queued_long_ago(user, workspace, "hello, still in the queue", rq_queue)
    starting, just = queued_long_ago(user, workspace, "hello, being started", rq_queue)
    taken_by_a_worker(just, rq_queue, started_ago=timedelta(seconds=1))
    started, dead_start = queued_long_ago(user, workspace, "hello, started", rq_queue)
    taken_by_a_worker(dead_start, rq_queue, started_ago=LONG_AGO)
    popped, dead_pop = queued_long_ago(user, workspace, "hello, popped", rq_queue)
    rq_queue.remove(dead_pop)  # off the queue, still `queued`: the worker died taking it

    done = {task_id: what for task_id, what, _ in reap()}

    # a long queue is no dead run, nor is a job a live worker started a moment ago
    assert done == {started.pk: "restarted", popped.pk: "restarted"}
    assert reap() == []  # exactly once: the hand-over beat for them
    ids = set(rq_queue.job_ids)
    # a run of its own, a job of its own: the dead worker's job keeps its id
    assert {f"task-{started.pk}-2", f"task-{popped.pk}-2", f"task-{waiting.pk}-1"} <= ids

    SimpleWorker([rq_queue], connection=rq_queue.connection).work(burst=True)
    for task in (waiting, started, popped):
        assert Task.objects.get(pk=task.pk).status == "completed", task.goal
        kinds = [event.type for event in events_of(task)]
        assert kinds.count("task_started") == 1 and kinds[-1] == "task_finished", kinds
        assert [event.seq for event in events_of(task)] == list(range(1, len(kinds) + 1))
    assert Task.objects.get(pk=starting.pk).status == "queued"  # its live worker runs it
