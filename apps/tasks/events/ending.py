"""The minimal write path that ends a task no run can end itself: the final status and, after
the events already stored, an `error` event (when there is an error) and `task_finished`, in one
transaction, with short ASCII texts only, so it can be written when the run's own events could
not (a row the database refused, the run's process gone, a cancel of a task nobody runs).

Used by the runner when its events cannot be stored (`storage_error`), by the reaper for a task
whose run died (`interrupted`), and by cancel for a task no run holds. The caller says which
state it expects the task in (`expect`), checked in the same transaction, so two of them never
both end one task, and a run that holds the task is never overtaken.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from apps.tasks.dispatch.deferral import wake_behind
from apps.tasks.events.local_delivery import deliver_local, task_group
from apps.tasks.models import FINAL_STATUSES, Task, TaskEvent, TaskStatus

log = logging.getLogger(__name__)


def error_struct(code: str, message: str, suggestions: list[str], retryable: bool) -> dict:
    return {
        "error_code": code,
        "message": message,
        "suggestions": suggestions,
        "retryable": retryable,
    }


STORAGE_ERROR = error_struct(
    "storage_error",
    "agentkit could not store this task's events; the task was ended",
    [
        "Try again; if it keeps failing, the server log says which row the database refused.",
    ],
    True,
)
INTERRUPTED = error_struct(
    "interrupted",
    "the process running this task stopped before the task ended",
    ["Send the message again (Retry); the workspace keeps what the run changed so far."],
    True,
)


def task_end_now(
    task_id: int,
    status: str,
    error: dict | None = None,
    *,
    expect: Callable[[Task], bool] = lambda task: True,
    final_too: bool = False,
) -> list[dict] | None:
    """End the task now (blocking). Returns the messages of the events written, None when the
    task had already ended or is not as `expect` wants it. `final_too`: also over a final
    status (one that a run's hook stored although its events could not be)."""
    now = timezone.now()
    with transaction.atomic():
        tasks = Task.objects.select_for_update().filter(pk=task_id)
        if not final_too:
            tasks = tasks.exclude(status__in=FINAL_STATUSES)
        task = tasks.first()
        if task is None or not expect(task):
            return None
        seq = task.last_seq
        events = []
        if error is not None:
            seq += 1
            events.append(
                TaskEvent(
                    task_id=task_id,
                    seq=seq,
                    type="error",
                    ts=now,
                    data={"step": 0, "fatal": True, "error_struct": error},
                )
            )
        seq += 1
        finished = {"status": status, "final": "", "usage": {}, "cost": 0.0, "error": error}
        events.append(
            TaskEvent(task_id=task_id, seq=seq, type="task_finished", ts=now, data=finished)
        )
        TaskEvent.objects.bulk_create(events)
        Task.objects.filter(pk=task_id).update(
            status=status,
            error=error,
            last_seq=seq,
            finished_at=now,
            run_owner="",
            started_at=task.started_at or now,
        )
    if status != TaskStatus.CANCELLED:
        from apps.specs.services import spec_finish_for_task

        spec_finish_for_task(task_id=task_id, completed=False)
    try:  # the tasks deferred behind it get their jobs (deferral.py; else the reaper's round)
        wake_behind(task_id)
    except Exception:
        log.warning("task %s: the tasks deferred behind it were not woken", task_id, exc_info=True)
    return [event.as_message() for event in events]


def publish_blocking(task_id: int, messages: list[dict]) -> None:
    """Send the events to the task's channel-layer group (its sockets in every process); a
    failure is logged: the rows are stored, and sockets catch up from the database."""
    layer = get_channel_layer()
    if layer is None or not messages:
        return
    try:
        async_to_sync(layer.group_send)(
            task_group(task_id), {"type": "task.events", "events": messages}
        )
    except Exception:
        log.warning("sending the end of task %s to its sockets failed", task_id, exc_info=True)


async def publish(task_id: int, messages: list[dict]) -> None:
    """As publish_blocking, from the event loop; this process's sockets of an inline run too."""
    if not messages:
        return
    await deliver_local(task_id, messages)
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(task_group(task_id), {"type": "task.events", "events": messages})
    except Exception:
        log.warning("sending the end of task %s to its sockets failed", task_id, exc_info=True)
