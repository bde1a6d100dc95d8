"""RQ job ids, one per run: `task-<id>-<n>`, n counting the jobs ever queued for the task.

A task's runs — the first, a run deferred back to the queue (deferral.py), a take-over by the
reaper — each get a job of their own, so RQ's clean-up of an old job (a dead worker's `started`
entry marked failed an hour later) never touches the job of the task's current run. The
counter lives in Redis beside the jobs (`agentkit:task-runs:<id>`), kept COUNTER_DAYS after its
last run: far longer than any job, so an id is never reused while RQ still knows the old job.
"""

from __future__ import annotations

import json

COUNTER_PREFIX = "agentkit:task-runs:"
TRACE_PREFIX = "agentkit:task-trace:"  # + id: the task's trace context (ops/tracing.py)
COUNTER_DAYS = 30


def _counter(task_id: int) -> str:
    return f"{COUNTER_PREFIX}{task_id}"


def job_id(task_id: int, run: int) -> str:
    return f"task-{task_id}-{run}"


def next_job_ids(connection, task_ids: list[int], traces: dict | None = None) -> list[str]:
    """The ids of the next jobs of `task_ids`, in order, in one Redis round trip. `traces`: task
    id -> its trace context (W3C headers), kept for all its runs (the first one given wins)."""
    pipe = connection.pipeline(transaction=False)
    for task_id, carrier in (traces or {}).items():
        pipe.set(TRACE_PREFIX + str(task_id), json.dumps(carrier), nx=True, ex=COUNTER_DAYS * 86400)
    for task_id in task_ids:
        pipe.incr(_counter(task_id))
        pipe.expire(_counter(task_id), COUNTER_DAYS * 86400)
    runs = pipe.execute()[len(traces or {}) :][::2]
    return [job_id(task_id, run) for task_id, run in zip(task_ids, runs, strict=True)]


def current_job_id(connection, task_id: int) -> str | None:
    """The id of the task's latest job, None when none was queued (or its counter expired)."""
    run = connection.get(_counter(task_id))
    return None if run is None else job_id(task_id, int(run))


def trace_context(connection, task_id: int) -> dict | None:
    """The task's trace context, as its queueing process left it (None: none)."""
    raw = connection.get(TRACE_PREFIX + str(task_id))
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
