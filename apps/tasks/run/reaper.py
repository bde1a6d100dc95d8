"""Tasks with no live run are ended or resumed: no task stays `queued` or `running` forever
because the process that ran it died (killed, out of memory, a lost machine, a restart).

Every process that runs tasks (the web server with the inline executor, an RQ worker's job, a
batch run) reaps every REAP_SECONDS, on its event loop (`reaper_start`): a task `queued` or
`running` whose heartbeat (liveness.py) is older than `executor.orphan_after_seconds` — or that
never got one and was queued that long ago — and that no run holds while its RQ job still waits
for a worker (never claimed, or handed over by a reaper: a long queue is no dead run; a job whose
worker died before claiming its task waits for nothing, whatever RQ still says) is

- started again when it never began its work (`queued`: created, or waiting for its workspace,
  when its process died; it changed nothing yet), or when it is a plan_exec or team_collab task
  that died while planning, before its spec was confirmed (a `task_resumed` with `restarted`
  says so);
- ended `cancelled` when a cancel was asked for it;
- resumed from its checkpoints when it is a plan_exec or team_collab task with a confirmed spec,
  and a react task from its stored events (its finished steps are not taken again;
  apps/engine/loop/resume.py); a direct_chat task answers again — at most MAX_HANDOVERS times,
  then it is ended as below;
- else ended `failed` with error_code `interrupted` (ending.py: an `error` and `task_finished`
  event, so every socket and API client sees the end).

Now and then (`expire_worktrees`) it also removes the worktrees of repository tasks that ended
more than `workspaces.worktree_ttl_days` ago (worktrees.py); their branches stay.

Exactly once: each of these is a conditional write on the heartbeat and owner the reaper read, so
of several processes reaping at once one acts, and a run that came back to life keeps its task.
A task handed to a new run gets a fresh heartbeat at once, so no reaper takes it twice.
"""

from __future__ import annotations

import asyncio
import logging
import random

from asgiref.sync import sync_to_async
from django.db import close_old_connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.tasks.dispatch.deferral import stuck, wake
from apps.tasks.dispatch.job_ids import current_job_id
from apps.tasks.dispatch.liveness import stale_before
from apps.tasks.events.ending import INTERRUPTED, publish, task_end_now
from apps.tasks.models import Task, TaskEvent, TaskStatus
from apps.tasks.ops.metrics import REAPER_ACTIONS
from apps.tasks.ops.retention import sweep as retention_sweep
from apps.tasks.run.db_threads import install as install_db_threads

log = logging.getLogger(__name__)

REAP_SECONDS = 5.0
MAX_HANDOVERS = 3  # runs given to a task whose runs keep dying (an out-of-memory loop)
BATCH = 100


def orphans() -> list[Task]:
    cutoff = stale_before()
    never_beaten = Q(heartbeat_at__isnull=True, created_at__lt=cutoff)
    waiting = Task.objects.filter(status__in=(TaskStatus.QUEUED, TaskStatus.RUNNING))
    dead = waiting.filter(Q(heartbeat_at__lt=cutoff) | never_beaten, deferred_behind__isnull=True)
    # A deferred task waits for another task's end, which queues its next job (deferral.py):
    # only one that nothing will wake any more is the reaper's.
    return list(dead.order_by("pk")[:BATCH]) + stuck()


def _rq_pending(task_id: int) -> bool:
    """The task's RQ job still waits for a worker (in its queue, or deferred or scheduled), or a
    worker took it a moment ago and is about to claim the task. Not a job whose worker died
    between taking it and claiming the task (runner.py claims first thing): RQ still says
    `started` (or `queued`, when the worker died as it took the job off the queue) until its
    own clean-up, an hour later with the jobs' time limit."""
    from django.conf import settings

    from apps.tasks.conf import agent_config

    executor = agent_config().executor
    if executor.kind != "rq" or not settings.REDIS_URL:
        return False
    try:
        import django_rq
        from rq import Queue
        from rq.exceptions import NoSuchJobError
        from rq.job import Job

        connection = django_rq.get_connection(executor.queue)
        job_id = current_job_id(connection, task_id)
        if job_id is None:
            return False
        job = Job.fetch(job_id, connection=connection)
        status = job.get_status(refresh=False)
        if status == "queued":
            return Queue(job.origin, connection=connection).get_job_position(job.id) is not None
    except NoSuchJobError:
        return False
    except Exception:  # Redis unreachable: do not guess; the next round asks again
        log.warning("reaper: RQ could not be asked about task %s", task_id, exc_info=True)
        return True
    if status == "started":  # a live worker claims the task within moments of starting it
        started = job.started_at
        return started is not None and started > stale_before()
    return status in {"deferred", "scheduled"}


def _same(seen: Task):
    """`expect` for task_end_now: nobody claimed or beat for the task since the reaper read it."""
    return lambda now: (
        now.run_owner == seen.run_owner
        and now.heartbeat_at == seen.heartbeat_at
        and now.status == seen.status
    )


def _hand_over(seen: Task) -> bool:
    """Give the task to a new run: a fresh heartbeat (no other reaper takes it), no owner (the
    new run's claim succeeds). False when someone else acted first."""
    same = Task.objects.filter(
        pk=seen.pk, run_owner=seen.run_owner, status=seen.status, heartbeat_at=seen.heartbeat_at
    )
    return bool(same.update(run_owner="", heartbeat_at=timezone.now(), orphaned=F("orphaned") + 1))


def _why(task: Task) -> str:
    """The `task_resumed` reason of a take-over."""
    from apps.tasks.dispatch.liveness import orphan_after_seconds

    return (
        "taken over automatically: the process running it stopped beating (no heartbeat for "
        f"{orphan_after_seconds():g} s: killed, out of memory or a lost machine); hand-over "
        f"{task.orphaned + 1} of {MAX_HANDOVERS}"
    )


def _take_over(task: Task) -> str | None:
    """How a task with no live run goes on: "resume" (from its stored steps or checkpoints),
    "restart" (from the beginning: it changed nothing yet), or None (it cannot)."""
    from apps.specs.checkpoints import RESUMABLE_MODES, STEP_RESUMABLE_MODES, runnable_spec

    if task.status == TaskStatus.QUEUED:  # created, or waiting for its workspace: nothing done
        return "restart"
    if task.mode in STEP_RESUMABLE_MODES:  # runner.py: from NOTHING_DONE when no step finished
        return "resume"
    if task.mode in RESUMABLE_MODES:
        # Died while planning, before its spec was confirmed: no phase ran, nothing changed.
        return "resume" if runnable_spec(task.pk) is not None else "restart"
    return None


def reap_one(task: Task) -> tuple[str, list[dict] | None] | None:
    """Blocking: end or hand over one orphan. Returns (what was done, the events written), or
    None when nothing was done (it waits in RQ's queue, or another process acted first)."""
    from apps.tasks.run.executors import task_submit

    # No run holds it — never claimed, or handed over by a reaper — and its RQ job still waits
    # for a worker: a long queue is no dead run (the hand-over's heartbeat does not beat there).
    if task.run_owner == "" and _rq_pending(task.pk):
        return None
    if task.cancel_requested_at is not None:
        messages = task_end_now(task.pk, TaskStatus.CANCELLED, expect=_same(task))
        return ("cancelled", messages) if messages else None
    if task.deferred_behind_id is not None:  # what it waited for ended without waking it
        return ("woken", None) if wake([task.pk], behind=task.deferred_behind_id) else None
    how = _take_over(task)
    if how is not None and task.orphaned < MAX_HANDOVERS:
        if not _hand_over(task):
            return None
        if how == "resume":
            task_submit(task_id=task.pk, reason=_why(task))
            return "resumed", None
        # A run that began (`running`) tells its sockets why it begins again.
        messages = _restart_note(task) if task.status == TaskStatus.RUNNING else None
        task_submit(task_id=task.pk)
        return "restarted", messages
    messages = task_end_now(task.pk, TaskStatus.FAILED, INTERRUPTED, expect=_same(task))
    return ("interrupted", messages) if messages else None


def _restart_note(task: Task) -> list[dict]:
    """The `task_resumed` of a run that starts again from the beginning (its planning died
    before its spec was confirmed), after the events stored: `restarted`, and why."""
    data = {
        "phase": None,
        "steps": 0,
        "restored_messages": 0,
        "llm_calls": 0,
        "counters": None,
        "restarted": True,
        "reason": _why(task) + "; started again from the beginning (no spec was confirmed)",
    }
    with transaction.atomic():
        current = Task.objects.select_for_update().get(pk=task.pk)
        event = TaskEvent.objects.create(
            task_id=task.pk,
            seq=current.last_seq + 1,
            type="task_resumed",
            ts=timezone.now(),
            data=data,
        )
        Task.objects.filter(pk=task.pk).update(last_seq=event.seq)
    return [event.as_message()]


EXPIRE_EVERY_SECONDS = 600.0
_expired_at = [float("-inf")]


def expire_worktrees(*, force: bool = False) -> list[int]:
    """Blocking, at most every EXPIRE_EVERY_SECONDS per process: the worktrees of tasks that
    ended more than `workspaces.worktree_ttl_days` ago are removed (worktrees.py)."""
    import time

    from apps.tasks.conf import agent_config
    from apps.tasks.vcs.worktrees import worktrees_expire

    if not force and time.monotonic() - _expired_at[0] < EXPIRE_EVERY_SECONDS:
        return []
    _expired_at[0] = time.monotonic()
    removed = worktrees_expire(agent_config())
    if removed:
        log.info("reaper: removed the expired worktrees of tasks %s", removed)
    return removed


def reap() -> list[tuple[int, str, list[dict] | None]]:
    """Blocking: one round over the orphans (and, now and then, the expired worktrees)."""
    close_old_connections()
    try:
        expire_worktrees()
    except Exception:
        log.warning("reaper: expired worktrees could not be removed", exc_info=True)
    done = []
    for task in orphans():
        try:
            outcome = reap_one(task)
        except Exception:
            log.exception("reaper: task %s could not be ended or resumed", task.pk)
            continue
        if outcome is not None:
            log.warning("reaper: task %s had no live run: %s", task.pk, outcome[0])
            REAPER_ACTIONS.labels(outcome[0]).inc()
            done.append((task.pk, *outcome))
    return done


async def reap_round() -> list[tuple[int, str, list[dict] | None]]:
    done = await sync_to_async(reap, thread_sensitive=False)()
    for task_id, _, messages in done:
        if messages:
            await publish(task_id, messages)
    try:  # events.retention: finished tasks' token events folded (every few minutes at most)
        await sync_to_async(retention_sweep, thread_sensitive=False)()
    except Exception:
        log.warning("retention: the finished tasks' events could not be folded", exc_info=True)
    return done


_reapers: dict[asyncio.AbstractEventLoop, asyncio.Task] = {}


def reaper_start() -> None:
    """Reap on the running loop from now on (once per loop)."""
    loop = asyncio.get_running_loop()
    running = _reapers.get(loop)
    if running is not None and not running.done():
        return
    for other in [known for known in _reapers if known.is_closed()]:
        _reapers.pop(other, None)
    _reapers[loop] = loop.create_task(_reap_forever(), name="agentkit-reaper")


async def _reap_forever() -> None:
    while True:
        # Processes started together do not all reap at the same moment.
        await asyncio.sleep(REAP_SECONDS * random.uniform(0.8, 1.2))
        try:
            await reap_round()
        except Exception:
            log.warning("reaper round failed", exc_info=True)


def reaping(app):
    """An ASGI application that, at its first connection, gives the serving loop threads that
    recycle their database connections (db_threads.py) and starts the reaper on it (the server's
    loop is not running yet when the application is built)."""
    started = False

    async def application(scope, receive, send):
        nonlocal started
        if not started:
            started = True
            install_db_threads()
            reaper_start()
        return await app(scope, receive, send)

    return application
