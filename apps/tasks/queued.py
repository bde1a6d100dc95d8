"""A new task sent to the RQ workers says at once that it waits for one.

With `executor: rq` a task's run starts when a worker is free: with every worker busy that may
be minutes. So that the person who sent it sees at once that it was taken in (and how many
tasks are ahead of it), the process that enqueues it writes the task's first event itself,
before the job is on the queue:

    seq 1  task_waiting  {"reason": "waiting for a free worker", "waiting_for": null,
                          "ahead": 3, "queue": "agent", "goal": …, "mode": …}

The run continues the task's seqs after it (the recorder starts at the stored `last_seq`), so
seqs stay contiguous; the chat shows the notice, with Cancel, until `task_started`. Only a task
with no event yet gets it: a task handed over to another worker (reaper.py) or resumed already
has a history, and says why in its `task_resumed`.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from apps.tasks.ending import publish_blocking
from apps.tasks.models import Task, TaskEvent, TaskStatus

log = logging.getLogger(__name__)

WORKER_WAIT_REASON = "waiting for a free worker"


def record_queued(task_id: int, *, queue: str, ahead: int) -> dict | None:
    """Write seq 1 `task_waiting` for a task that has no event yet and is still queued, and
    send it to the task's sockets; returns its message, or None when the task already had an
    event (it is not new) or is no longer queued."""
    with transaction.atomic():
        task = (
            Task.objects.select_for_update()
            .filter(pk=task_id, last_seq=0, status=TaskStatus.QUEUED)
            .only("pk", "goal", "mode")
            .first()
        )
        if task is None:
            return None
        data = {
            "reason": WORKER_WAIT_REASON,
            "waiting_for": None,
            "ahead": ahead,
            "queue": queue,
            "goal": task.goal,
            "mode": task.mode,
        }
        event = TaskEvent.objects.create(
            task_id=task_id, seq=1, type="task_waiting", data=data, ts=timezone.now()
        )
        Task.objects.filter(pk=task_id).update(last_seq=1)
    message = event.as_message()
    publish_blocking(task_id, [message])  # a socket that already follows it (else: replay)
    return message
