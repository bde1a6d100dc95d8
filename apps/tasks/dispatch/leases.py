"""One writer per working tree: a run that may change files (react, plan_exec, team_collab) holds
the lease of the tree it works in (`WorkspaceLease`, one row per `lease_key`) from before its
first step to its end; direct_chat, which changes nothing, never waits for it. A plain
workspace is one tree (key `workspace:<id>`); on a repository workspace each conversation works
on its own branch in its own worktree (key `workspace:<id>:branch:<conversation>`,
worktrees.py), so tasks on one repository run in parallel.

A second run finds the lease held and waits, still `queued`, with a `task_waiting` event that
says for which task ("waiting for task #12 on this workspace"); it takes the lease when the
holder ends. Waiting runs take it in the order their tasks were created; a task the reaper
handed over to a new run (reaper.py) waits from the hand-over on, `running` when its dead run
had begun, so a later task whose run happens to ask first (a plan_exec task that would then hold
the workspace while its spec awaits review) does not go before it. The lease lives as long
as its holder's run: a holder that has ended, or whose heartbeat went stale (its process died,
liveness.py), gives it up to the next run that asks — nothing to clean up after a crash.

One run per conversation at a time: before that, every turn of a conversation (direct_chat
too) waits, still `queued`, for the conversation's earlier turns that are unfinished and have a
live run or are about to get one (`earlier_turn`: "waiting for the conversation's earlier turn
(task #12)"); a turn parked at its spec review holds nothing. A direct_chat of another
conversation never waits.

A run of an RQ job does not wait in its worker: it goes back to the queue behind the task it
waits for, and its next job comes when that task ends (deferral.py); waiting runs, deferred
ones included, still take the lease in the order their tasks were created. A run waiting in
this process (the inline executor) wakes as soon as a run of this process ends (`run_ended`); runs of
other processes are seen within WAIT_POLL_SECONDS.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Q

from apps.tasks.dispatch.liveness import heartbeat_stale
from apps.tasks.models import FINAL_STATUSES, Task, TaskStatus, WorkspaceLease

LEASED_MODES = frozenset({"react", "plan_exec", "team_collab"})
WAIT_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Waiting:
    """The lease is not this run's yet: `task_id` (which holds it, or waits too and was queued
    earlier) goes first."""

    task_id: int
    turn: bool = False  # an earlier turn of the conversation (else: the workspace's lease)

    @property
    def reason(self) -> str:
        if self.turn:
            return f"waiting for the conversation's earlier turn (task #{self.task_id})"
        return f"waiting for task #{self.task_id} on this workspace"


def _live(task: Task | None) -> bool:
    return (
        task is not None
        and task.status not in FINAL_STATUSES
        and task.run_owner != ""
        and not heartbeat_stale(task.heartbeat_at)
    )


def earlier_turn(*, task_id: int, conversation_id: int | None) -> Waiting | None:
    """Blocking. The conversation's nearest earlier turn that is unfinished and has a live run,
    or was queued moments ago and has yet to be claimed (an RQ job on its way to a worker)."""
    if conversation_id is None:
        return None
    earlier = (
        Task.objects.filter(conversation_id=conversation_id, pk__lt=task_id)
        .exclude(status__in=FINAL_STATUSES | {TaskStatus.PARKED})
        .order_by("-pk")
        .only("pk", "status", "run_owner", "heartbeat_at", "created_at", "deferred_behind")
    )
    for task in earlier:
        if _waits_too(task) or _live(task):
            return Waiting(task.pk, turn=True)
    return None


def _waits_too(task: Task) -> bool:
    """A task with no run that will get one: its job was queued moments ago (a new task, one
    handed over or woken: no owner, a fresh heartbeat), or it is deferred behind another task
    (deferral.py: its next job comes when that one ends)."""
    if task.deferred_behind_id is not None:
        return True
    return task.run_owner == "" and not heartbeat_stale(task.heartbeat_at, since=task.created_at)


def lease_key(task: Task) -> str:
    """The tree a task writes: its workspace, or on a repository workspace its conversation's
    branch (one worktree per conversation: a follow-up continues its branch)."""
    if not task.workspace.is_repository:
        return f"workspace:{task.workspace_id}"
    return f"workspace:{task.workspace_id}:branch:{task.conversation_id or f't{task.pk}'}"


def _key_of(task_id: int, key: str | None) -> str:
    if key is not None:
        return key
    return lease_key(Task.objects.select_related("workspace").get(pk=task_id))


def lease_acquire(*, task_id: int, workspace_id: int, key: str | None = None) -> Waiting | None:
    """Blocking. Take the lease of the task's tree (`key`; None: lease_key(task)) for the task
    (None), or say whom it waits for. Reads first: a run that must wait (most asks, while
    several wait) takes no write lock."""
    key = _key_of(task_id, key)
    waiting = _blocked(task_id, workspace_id, key)
    if waiting is not None:
        return waiting
    with transaction.atomic():
        lease = WorkspaceLease.objects.select_for_update().filter(key=key).first()
        if lease is not None and lease.task_id == task_id:
            return None
        waiting = _blocked(task_id, workspace_id, key, lease)  # again, under the lock
        if waiting is not None:
            return waiting
        if lease is None:
            try:
                with transaction.atomic():
                    WorkspaceLease.objects.create(
                        workspace_id=workspace_id, key=key, task_id=task_id
                    )
            except IntegrityError:  # another process took it first: ask again
                return lease_acquire(task_id=task_id, workspace_id=workspace_id, key=key)
        else:
            lease.task_id = task_id
            lease.save(update_fields=["task", "acquired_at"])
    return None


def _blocked(
    task_id: int, workspace_id: int, key: str, lease: WorkspaceLease | None = ...
) -> Waiting | None:
    """Whom the task waits for: the live holder of the lease, else an earlier waiter."""
    if lease is ...:
        lease = WorkspaceLease.objects.filter(key=key).first()
    if lease is not None and lease.task_id == task_id:
        return None
    if lease is not None:
        holder = Task.objects.filter(pk=lease.task_id).first()
        if _live(holder):
            return Waiting(holder.pk)
    earlier = _earlier_waiter(task_id, workspace_id, key)
    return Waiting(earlier) if earlier is not None else None


def _earlier_waiter(task_id: int, workspace_id: int, key: str) -> int | None:
    """A task created before this one that waits for the same lease too (called when no live run
    holds it): a live run's task, `queued` — or `running`, resumed by a new run after a
    take-over —, one deferred (deferral.py), or one just woken or handed over by the reaper whose
    new run has yet to claim it (no owner, a fresh heartbeat: it keeps its place until that
    heartbeat goes stale)."""
    waiting = Task.objects.filter(
        workspace_id=workspace_id,
        status__in=(TaskStatus.QUEUED, TaskStatus.RUNNING),
        mode__in=LEASED_MODES,
        pk__lt=task_id,
    ).filter(~Q(run_owner="") | Q(deferred_behind__isnull=False) | Q(heartbeat_at__isnull=False))
    if ":branch:" in key:  # a repository's branch: only its own conversation's turns
        conversation = _conversation_of(key)
        if conversation is None:  # a task of its own: nobody else works on its branch
            return None
        waiting = waiting.filter(conversation_id=conversation)
    fields = ("pk", "status", "run_owner", "heartbeat_at", "created_at", "deferred_behind")
    for task in waiting.order_by("pk").only(*fields):
        if _live(task) or _waits_too(task):
            return task.pk
    return None


def _conversation_of(key: str) -> int | None:
    ref = key.rsplit(":", 1)[-1]
    return int(ref) if ref.isdigit() else None


def lease_release(*, task_id: int, workspace_id: int) -> None:
    """Blocking. The run ended: its lease goes (if it still holds it)."""
    WorkspaceLease.objects.filter(workspace_id=workspace_id, task_id=task_id).delete()
    _released(workspace_id)


def waiting_for(task: Task) -> int | None:
    """The task that `task` (queued) waits for, if any: its conversation's earlier turn, else the
    one whose live run holds its tree (its workspace, or its branch's worktree)."""
    turn = earlier_turn(task_id=task.pk, conversation_id=task.conversation_id)
    if turn is not None:
        return turn.task_id
    if task.mode not in LEASED_MODES:
        return None
    lease = WorkspaceLease.objects.filter(key=lease_key(task)).select_related("task").first()
    if lease is None or lease.task_id == task.pk or not _live(lease.task):
        return None
    return lease.task_id


# Runs of this process waiting for a workspace or a turn, woken when one of this process's runs
# releases the workspace or ends (by loop: an asyncio.Event belongs to one loop).
_waiters: dict[int, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}


def run_ended(workspace_id: int) -> None:
    """A run of this process ended: the next turn of its conversation may start."""
    _released(workspace_id)


def _released(workspace_id: int) -> None:
    for loop, event in list(_waiters.get(workspace_id, ())):
        if not loop.is_closed():
            loop.call_soon_threadsafe(event.set)


async def wait_for_release(workspace_id: int, timeout: float = WAIT_POLL_SECONDS) -> None:
    """Until a run of this process releases the workspace or ends, or `timeout` passes."""
    event = asyncio.Event()
    entry = (asyncio.get_running_loop(), event)
    _waiters.setdefault(workspace_id, set()).add(entry)
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        pass
    finally:
        waiters = _waiters.get(workspace_id)
        if waiters is not None:
            waiters.discard(entry)
            if not waiters:
                _waiters.pop(workspace_id, None)
