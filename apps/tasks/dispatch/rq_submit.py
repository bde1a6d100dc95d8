"""Queueing a task's run as an RQ job (executor rq: executors.py; the deferred runs woken by
deferral.py): the job's id (job_ids.py), its time limit, and the new tasks' first event
(queued.py), without importing the runner (a job only names its function).
"""

from __future__ import annotations

import logging

from django.conf import settings

from apps.tasks.dispatch.job_ids import next_job_ids
from apps.tasks.dispatch.queued import record_queued

log = logging.getLogger(__name__)

# The job RQ runs, by name: the worker imports it (apps/tasks/jobs.py, which runs the runner and
# the reaper); importing it here would close a loop jobs → reaper → executors → jobs.
RUN_TASK_JOB = "apps.tasks.jobs.run_task_job"


def task_enqueue_rq(
    *, task_id: int, queue: str, review_wait: float = 0, reason: str | None = None
) -> None:
    """Put the task on RQ queue `queue` as job `task-<id>-<n>`, its n-th (job_ids.py);
    its time limit is the queue's plus `review_wait`, the spec review it may wait for."""
    task_enqueue_rq_many(task_ids=[task_id], queue=queue, review_wait=review_wait, reason=reason)


def task_enqueue_rq_many(
    *,
    task_ids: list[int],
    queue: str,
    review_wait: float = 0,
    reason: str | None = None,
    record: bool = True,
    woken: bool = False,
) -> dict[int, list[dict]]:
    """task_enqueue_rq for several tasks, in this order, in one Redis round trip. New tasks (no
    `reason`) first get their `task_waiting` event, seq 1, with the jobs ahead (queued.py;
    `record` False: they were created with it); returns those events' messages per task."""
    from rq import Queue

    limit = settings.RQ_QUEUES.get(queue, {}).get("DEFAULT_TIMEOUT", 3600)
    target = rq_queue(queue)
    written: dict[int, list[dict]] = {}
    if reason is None and record:
        try:
            for message in record_queued(task_ids, queue=queue, ahead=target.count):
                written.setdefault(message["task_id"], []).append(message)
        except Exception:  # the runs record their own events all the same (Redis down: below)
            log.warning(
                "tasks %s: their queued events could not be written", task_ids, exc_info=True
            )
    traces = {} if woken else _submitted(task_ids)
    job_ids = next_job_ids(target.connection, task_ids, traces)
    target.enqueue_many(
        [
            Queue.prepare_data(
                RUN_TASK_JOB,
                (task_id,) if reason is None else (task_id, reason),
                job_id=job_id,
                timeout=int(limit + review_wait),
            )
            for task_id, job_id in zip(task_ids, job_ids, strict=True)
        ]
    )
    return written


# (queue name, its connection settings) -> Redis client: django_rq.get_queue makes a new client
# (a new connection pool, so a new TCP connection) at every call; a process keeps one per queue
# and settings (redis-py's pool is thread-safe, and starts afresh in a forked child).
_rq_connections: dict = {}


def rq_queue(name: str):
    import django_rq
    from django_rq.settings import QUEUES

    key = (name, repr(sorted(QUEUES.get(name, {}).items())))
    connection = _rq_connections.get(key)
    if connection is None:
        connection = _rq_connections[key] = django_rq.get_connection(name)
    return django_rq.get_queue(name, connection=connection)


def _submitted(task_ids: list[int]) -> dict[int, dict]:
    """With tracing on: each task's trace begins here (ops/tracing.py); {} when off."""
    from apps.tasks.ops import tracing

    if tracing.tracer() is None:
        return {}
    from apps.tasks.models import Task

    try:
        modes = dict(Task.objects.filter(pk__in=task_ids).values_list("pk", "mode"))
        return tracing.submitted([(task_id, modes.get(task_id, "")) for task_id in task_ids])
    except Exception:
        log.warning("tasks %s: their traces could not begin", task_ids, exc_info=True)
        return {}
