"""RQ jobs: fetch by id, call one function."""

from __future__ import annotations

import asyncio


def run_task_job(task_id: int, reason: str | None = None) -> str:
    """`reason`: why a resumed run resumes (reaper.py's take-over of a dead worker's task)."""
    from rq import get_current_job

    return asyncio.run(_run(task_id, reason, get_current_job()))  # RQ's job: this thread's


async def _run(task_id: int, reason: str | None = None, job=None) -> str:
    from apps.tasks.run.db_threads import install
    from apps.tasks.run.reaper import reaper_start
    from apps.tasks.run.runner import run_task

    install()  # the job's threads recycle their database connections (db_threads.py)
    reaper_start()  # a worker running tasks reaps too (reaper.py)
    observer = await asyncio.to_thread(_observer, task_id, job)
    return await run_task(task_id, resume_reason=reason, defer=True, observer=observer)


def _observer(task_id: int, job):
    """The run's metrics and trace (ops/observe.py): how long its job waited in the queue, and
    the trace its queueing process began. None when the task is gone (run_task says so)."""
    from apps.tasks.dispatch.job_ids import trace_context
    from apps.tasks.models import Task
    from apps.tasks.ops.observe import RunObserver

    task = Task.objects.filter(pk=task_id).only("pk", "mode", "created_at", "started_at").first()
    if task is None:
        return None
    waited = carrier = None
    if job is not None:
        if job.enqueued_at is not None and job.started_at is not None:
            waited = (job.origin, (job.started_at - job.enqueued_at).total_seconds())
        try:
            carrier = trace_context(job.connection, task_id)
        except Exception:  # Redis away: the run goes on, in a trace of its own
            carrier = None
    return RunObserver(task, carrier=carrier, queue_wait=waited)
