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

The tasks a burst of socket messages created together get theirs in their creation's own
transaction (QueuedOpening; intake.py), the others (the JSON API, run_tasks) in one transaction
just before their jobs are queued (record_queued); executors.py enqueues a burst's jobs in one
Redis round trip. Nothing is sent to the channel layer: no socket
follows a task before its creation returned. The socket that sent the message gets the event in
hand from the intake (intake.Created) and sends it at once; a socket that follows the task later
replays it from the database (consumers.py).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from apps.tasks.models import Task, TaskEvent, TaskStatus

WORKER_WAIT_REASON = "waiting for a free worker"


class QueuedOpening:
    """The first event of tasks created for the queue, written in their creation's transaction
    (creation.task_create_many's `opening`): the tasks go in with `last_seq` 1 and their seq 1
    `task_waiting` beside them, one statement for all, and no second transaction. `ahead`: the
    jobs queued before the first of them; each task placed counts for the next. `messages`: the
    events written, per task, for the sockets that sent them."""

    def __init__(self, *, queue: str, ahead: int) -> None:
        self.queue = queue
        self.ahead = ahead
        self.messages: dict[int, list[dict]] = {}

    def events(self, tasks: list[Task]) -> list[TaskEvent]:
        now = timezone.now()
        made = []
        for task in tasks:
            made.append(
                TaskEvent(
                    task_id=task.pk,
                    seq=1,
                    type="task_waiting",
                    data=_waiting(task, queue=self.queue, ahead=self.ahead),
                    ts=now,
                )
            )
            self.ahead += 1
        return made

    def written(self, events: list[TaskEvent]) -> None:
        """After the commit: the messages of what was stored."""
        for event in events:
            self.messages[event.task_id] = [event.as_message()]


def _waiting(task: Task, *, queue: str, ahead: int) -> dict:
    return {
        "reason": WORKER_WAIT_REASON,
        "waiting_for": None,
        "ahead": ahead,
        "queue": queue,
        "goal": task.goal,
        "mode": task.mode,
    }


def record_queued(task_ids: list[int], *, queue: str, ahead: int) -> list[dict]:
    """Write seq 1 `task_waiting` for each of `task_ids` (in queue order, `ahead` jobs before
    the first) that has no event yet and is still queued; returns their messages."""
    now = timezone.now()
    place = {task_id: index for index, task_id in enumerate(task_ids)}
    with transaction.atomic():
        tasks = (
            Task.objects.select_for_update()
            .filter(pk__in=task_ids, last_seq=0, status=TaskStatus.QUEUED)
            .only("pk", "goal", "mode")
            .order_by("pk")
        )
        events = [
            TaskEvent(
                task_id=task.pk,
                seq=1,
                type="task_waiting",
                data=_waiting(task, queue=queue, ahead=ahead + place[task.pk]),
                ts=now,
            )
            for task in tasks
        ]
        if events:
            TaskEvent.objects.bulk_create(events)
            Task.objects.filter(pk__in=[event.task_id for event in events]).update(last_seq=1)
    return [event.as_message() for event in events]
