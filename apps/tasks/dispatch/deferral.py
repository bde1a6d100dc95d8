"""Waiting never holds a worker: a run of an RQ job that cannot take its workspace (or its
conversation's turn) yet goes back to the queue instead of waiting in the worker.

    run (RQ job task-<id>-<n>)  ── lease busy: Waiting(B) ──▶  defer(task, claim, B)
        the task stays `queued`, `deferred_behind` = B, no owner, no heartbeat; the job ends
    B's run ends (run_guard.release) or B is ended (ending.task_end_now) ──▶  wake_behind(B)
        every task deferred behind B, oldest first, gets its next job (task-<id>-<n+1>)

Order is kept: leases.py counts a deferred task, and one just woken, as a waiter that goes
before every later task of its workspace or conversation. A wake-up is never lost: `defer`
looks at B again after it has written, and B's end reads the deferred tasks after it has
written its own (one of the two sees the other); the reaper wakes a task whose B ended or died
without waking it (`stuck`). The inline executor's runs wait on the server's event loop, which
holds no worker: they never defer.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.tasks.conf import agent_config
from apps.tasks.dispatch.liveness import beater, heartbeat_stale, stale_before
from apps.tasks.dispatch.rq_submit import task_enqueue_rq_many
from apps.tasks.models import FINAL_STATUSES, Task

log = logging.getLogger(__name__)


def still_blocks(task: Task | None) -> bool:
    """`task` (what a deferred task waits for) will end or wake it: it is unfinished and has a
    live run, is deferred itself, or was just handed a job (no owner, a fresh heartbeat)."""
    if task is None or task.status in FINAL_STATUSES:
        return False
    if task.deferred_behind_id is not None:
        return True
    return not heartbeat_stale(task.heartbeat_at)


def defer(task_id: int, claim: str, behind: int) -> bool:
    """Blocking. The run holding `claim` gives the task back to the queue behind task `behind`.
    False when the run no longer holds the task (nothing changed). When `behind` ended
    meanwhile, the task is woken at once (its next job is queued)."""
    deferred = Task.objects.filter(pk=task_id, run_owner=claim).update(
        deferred_behind_id=behind, run_owner="", heartbeat_at=None
    )
    beater().discard(claim)
    if not deferred:
        return False
    blocker = Task.objects.filter(pk=behind).first()
    if not still_blocks(blocker):
        wake([task_id], behind=behind)
    return True


def wake_behind(task_id: int) -> list[int]:
    """Blocking. Task `task_id`'s run ended (or the task did): the tasks deferred behind it get
    their next jobs, oldest first. Returns their ids."""
    ids = list(
        Task.objects.filter(deferred_behind_id=task_id)
        .exclude(status__in=FINAL_STATUSES)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    return wake(ids, behind=task_id) if ids else []


def wake(task_ids: list[int], *, behind: int | None = None) -> list[int]:
    """Blocking. Queue the next job of each deferred task of `task_ids` that is still deferred
    (behind `behind`, when given), in this order; its fresh heartbeat makes it a waiter that
    goes first until its job runs. Two wakers never both queue one: the first clears it."""
    woken = []
    with transaction.atomic():
        for task_id in task_ids:
            tasks = Task.objects.filter(pk=task_id, deferred_behind__isnull=False)
            if behind is not None:
                tasks = tasks.filter(deferred_behind_id=behind)
            if tasks.update(deferred_behind=None, heartbeat_at=timezone.now()):
                woken.append(task_id)
        if woken:
            transaction.on_commit(lambda: _enqueue(woken))
    if woken:
        log.info("tasks %s woken: task #%s no longer holds them back", woken, behind)
    return woken


def _enqueue(task_ids: list[int]) -> None:
    """Their next jobs, in this order, in one round trip (only RQ jobs defer)."""
    config = agent_config()
    if config.executor.kind != "rq" or not settings.REDIS_URL:
        log.warning("tasks %s were deferred, but the executor is not rq now", task_ids)
        return
    review_wait = config.spec_review.timeout_seconds if config.spec_review.enabled else 0
    task_enqueue_rq_many(
        task_ids=task_ids,
        queue=config.executor.queue,
        review_wait=review_wait,
        record=False,
        woken=True,
    )


def stuck() -> list[Task]:
    """Deferred tasks that nothing will wake: what they wait for ended or its run died, or a
    cancel was asked for them (the reaper wakes or ends them)."""
    cutoff = stale_before()
    blocker_gone = Q(deferred_behind__status__in=FINAL_STATUSES) | (
        Q(deferred_behind__deferred_behind__isnull=True)
        & (
            Q(deferred_behind__heartbeat_at__lt=cutoff)
            | Q(deferred_behind__heartbeat_at__isnull=True, deferred_behind__created_at__lt=cutoff)
        )
    )
    return list(
        Task.objects.filter(deferred_behind__isnull=False)
        .exclude(status__in=FINAL_STATUSES)
        .filter(blocker_gone | Q(cancel_requested_at__isnull=False))
        .order_by("pk")[:100]
    )
