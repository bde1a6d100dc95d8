"""How a task's stored events age (`events` in agentkit.yaml).

A run stores its model's text as it streams: `token` (and `reasoning`) events, batched, a few
per step — most of a finished task's rows. `events.retention: N` folds them, N days after the
task finished: each unbroken run of one step's token (or reasoning) events becomes one event
with the run's text (a `restart` among them — a retried call that dropped the step's text —
becomes one `restart` event before it, so nothing shows that the chat would not have shown).
Every other event stays as it was, with its seq; the chat replays a folded task the same (it
takes seqs in order, gaps included). A 50-step task keeps a few dozen rows of its 150-250.

`prune` (manage.py prune_events --older-than 90d) goes further for tasks finished before the
cut: only their `task_started`, `final_answer`, `error` and `task_finished` events stay (the
goal, the answer or what went wrong); the task's row (status, result, usage) is untouched.

The reaper's rounds fold (`sweep`, at most every SWEEP_SECONDS, BATCH tasks a time), so no
extra process is needed.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from apps.tasks.models import FINAL_STATUSES, Task, TaskEvent

log = logging.getLogger(__name__)

TEXT_TYPES = ("token", "reasoning")
KEPT_WHEN_PRUNED = ("task_started", "final_answer", "error", "task_finished")
SWEEP_SECONDS = 300.0
BATCH = 200
FOLD_CHUNK = 50  # tasks folded in one transaction
_last_sweep = [float("-inf")]


def _key(event) -> tuple:
    data = event.data if isinstance(event.data, dict) else {}
    return (event.type, data.get("step"), data.get("phase_id"))


def folded(events: list[TaskEvent]) -> tuple[list[TaskEvent], list[int]]:
    """The events of one task (by seq) folded: (rows to update in place, ids to delete)."""
    changed: list[TaskEvent] = []
    dropped: list[int] = []
    group: list[TaskEvent] = []

    def close() -> None:
        if len(group) < 2:
            group.clear()
            return
        text, restart, base = "", None, None
        for event in group:
            if event.data.get("restart"):
                text, restart = "", restart or event.data
            else:
                text += event.data.get("text") or ""
                base = base or event.data
        # The group's first rows (their seqs, in order) take the folded events: the restart,
        # then the text; the others go.
        keep = []
        if restart is not None:
            keep.append(dict(restart))
        if base is not None:
            keep.append({**base, "text": text})
        for event, data in zip(group, keep, strict=False):
            event.data = data
            changed.append(event)
        dropped.extend(event.pk for event in group[len(keep) :])
        group.clear()

    for event in events:
        if event.type in TEXT_TYPES and (not group or _key(group[0]) == _key(event)):
            group.append(event)
            continue
        close()
        if event.type in TEXT_TYPES:
            group.append(event)
    close()
    return changed, dropped


def fold_task(task_id: int) -> int:
    """Blocking. Fold one finished task's text events; returns the rows removed."""
    return fold_tasks([task_id])


def fold_tasks(task_ids: list[int]) -> int:
    """Blocking. Fold these finished tasks' text events, in one transaction (a few statements
    for all of them); returns the rows removed. Tasks not finished, or folded already, stay."""
    with transaction.atomic():
        ids = list(
            Task.objects.select_for_update()
            .filter(pk__in=task_ids, status__in=FINAL_STATUSES, events_folded_at__isnull=True)
            .values_list("pk", flat=True)
        )
        if not ids:
            return 0
        changed: list[TaskEvent] = []
        dropped: list[int] = []
        events = TaskEvent.objects.filter(task_id__in=ids).order_by("task_id", "seq")
        current: list[TaskEvent] = []
        for event in events.iterator(chunk_size=5000):
            if current and current[0].task_id != event.task_id:
                _fold_into(current, changed, dropped)
                current = []
            current.append(event)
        _fold_into(current, changed, dropped)
        if dropped:
            for start in range(0, len(dropped), 5000):
                TaskEvent.objects.filter(pk__in=dropped[start : start + 5000]).delete()
            TaskEvent.objects.bulk_update(changed, ["data"], batch_size=1000)
        Task.objects.filter(pk__in=ids).update(events_folded_at=timezone.now())
    return len(dropped)


def _fold_into(events: list[TaskEvent], changed: list, dropped: list) -> None:
    more_changed, more_dropped = folded(events)
    changed.extend(more_changed)
    dropped.extend(more_dropped)


def due(days: int, limit: int = BATCH) -> list[int]:
    cutoff = timezone.now() - timedelta(days=days)
    return list(
        Task.objects.filter(
            events_folded_at__isnull=True, finished_at__lt=cutoff, status__in=FINAL_STATUSES
        )
        .order_by("finished_at")
        .values_list("pk", flat=True)[:limit]
    )


def sweep(days: int | None = None, *, force: bool = False) -> tuple[int, int]:
    """Blocking. Fold the tasks `events.retention` says are due (at most BATCH, at most every
    SWEEP_SECONDS unless `force`); returns (tasks folded, rows removed)."""
    if days is None:
        from apps.tasks.conf import agent_config

        days = agent_config().events.retention
    if days is None:
        return 0, 0
    now = time.monotonic()
    if not force and now - _last_sweep[0] < SWEEP_SECONDS:
        return 0, 0
    _last_sweep[0] = now
    batch = due(days)
    tasks, removed = len(batch), 0
    for start in range(0, len(batch), FOLD_CHUNK):
        removed += fold_tasks(batch[start : start + FOLD_CHUNK])
    if tasks:
        log.info("retention: %d finished task(s) folded, %d event rows removed", tasks, removed)
    return tasks, removed


def prune(older_than: timedelta, *, dry_run: bool = False) -> tuple[int, int]:
    """Blocking. For tasks finished more than `older_than` ago, delete every event but those
    KEPT_WHEN_PRUNED; returns (tasks, rows) deleted or, with `dry_run`, that would be."""
    cutoff = timezone.now() - older_than
    tasks = Task.objects.filter(status__in=FINAL_STATUSES, finished_at__lt=cutoff)
    total_tasks = total_rows = 0
    last = 0
    while True:
        ids = list(tasks.filter(pk__gt=last).order_by("pk").values_list("pk", flat=True)[:BATCH])
        if not ids:
            break
        last = ids[-1]
        rows = TaskEvent.objects.filter(task_id__in=ids).exclude(type__in=KEPT_WHEN_PRUNED)
        total_tasks += rows.values_list("task_id", flat=True).distinct().count()
        if dry_run:
            total_rows += rows.count()
        else:
            with transaction.atomic():
                total_rows += rows.delete()[0]
    return total_tasks, total_rows
