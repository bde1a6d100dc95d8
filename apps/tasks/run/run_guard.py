"""What a run holds besides its events, for runner.py: its claim on the task (liveness.py), the
workspace's lease (leases.py), and the way out when its events cannot be stored (ending.py).

    claim = await claim_task(task_id)             # None: another live run holds the task
    taken = await take_workspace(recorder, task, token)   # its turn, then the workspace: waits,
                                                          # `queued`, with task_waiting
    ...
    await release(task, claim, leased)           # in the run's finally, run to completion

and how a run ends when its engine could not end it: `abort_run` (a bad workspace, a crash),
`end_unstarted` (cancelled while it waited), `end_on_storage_failure`.
"""

from __future__ import annotations

import logging
from functools import partial

from asgiref.sync import sync_to_async

from apps.engine.events import ErrorStruct
from apps.engine.loop.cancellation import CancellationToken
from apps.engine.task import TaskResult
from apps.specs.stage import close_open_reviews
from apps.tasks.dispatch.deferral import defer, wake_behind
from apps.tasks.dispatch.leases import (
    LEASED_MODES,
    Waiting,
    earlier_turn,
    lease_acquire,
    lease_release,
    run_ended,
    wait_for_release,
)
from apps.tasks.dispatch.liveness import run_claim, run_release
from apps.tasks.events.ending import STORAGE_ERROR, publish, task_end_now
from apps.tasks.events.recorder import EventRecorder, StorageFailed
from apps.tasks.failure import scrub_struct
from apps.tasks.models import Task
from apps.tasks.run.lifecycle import finish_task, run_to_completion

log = logging.getLogger(__name__)


async def claim_task(task_id: int) -> str | None:
    return await sync_to_async(run_claim, thread_sensitive=False)(task_id)


DEFERRED = "deferred"  # take_workspace: the run went back to the queue (deferral.py)
LOST = "lost"  # take_workspace: the run no longer holds the task (a reaper or a cancel acted)


async def take_workspace(
    recorder: EventRecorder, task: Task, token: CancellationToken, defer_claim: str | None = None
) -> bool | str | None:
    """Wait for the task's turn in its conversation (the earlier turns end first), then hold its
    workspace before the run changes it: True once held, None for a mode that does not need it
    (direct_chat), False when the task was cancelled while it waited. While it waits the task
    stays `queued`; a `task_waiting` event names the task it waits for (again when that
    changes). `defer_claim` (a run of an RQ job, holding that claim): instead of waiting, the run
    gives the task back to the queue behind the task it waits for and returns DEFERRED (LOST
    when it no longer held the task: someone else acted on it meanwhile)."""
    said: list[Waiting] = []
    turn = sync_to_async(earlier_turn, thread_sensitive=False)
    ask = partial(turn, task_id=task.pk, conversation_id=task.conversation_id)
    waited = await _wait(recorder, task, token, ask, said, defer_claim)
    if waited is not True:
        return waited
    if task.mode not in LEASED_MODES:
        return None
    acquire = sync_to_async(lease_acquire, thread_sensitive=False)
    ask = partial(acquire, task_id=task.pk, workspace_id=task.workspace_id)
    return await _wait(recorder, task, token, ask, said, defer_claim)


async def _wait(recorder, task, token, ask, said: list[Waiting], defer_claim=None) -> bool | str:
    """Ask until nobody goes first (True), the task is cancelled (False) or, with
    `defer_claim`, the run went back to the queue (DEFERRED, or LOST)."""
    while True:
        waiting = await ask()
        if waiting is None:
            return True
        if (not said or said[-1] != waiting) and task.deferred_behind_id != waiting.task_id:
            said.append(waiting)
            await recorder.record(
                "task_waiting",
                {
                    "reason": waiting.reason,
                    "waiting_for": waiting.task_id,
                    "goal": task.goal,
                    "mode": task.mode,
                },
            )
        if token.cancelled:
            return False
        if defer_claim is not None:
            await recorder.flush()  # its task_waiting is stored before another run may start
            if await sync_to_async(defer, thread_sensitive=False)(
                task.pk, defer_claim, waiting.task_id
            ):
                return DEFERRED
            return LOST
        await wait_for_release(task.workspace_id)


def _release(task_id: int, workspace_id: int, claim: str | None, leased: bool) -> None:
    try:
        if leased:
            lease_release(task_id=task_id, workspace_id=workspace_id)
        else:
            run_ended(workspace_id)  # the conversation's next turn may start
    finally:
        if claim is not None:
            run_release(task_id, claim)
        wake_behind(task_id)  # the runs deferred behind this one get their jobs


async def release(task: Task, claim: str | None, leased: bool) -> None:
    """The run is over: the workspace and the task are free for the next run (even when the run
    is being cancelled: lifecycle.run_to_completion)."""
    if claim is None and not leased:
        return
    try:
        await run_to_completion(_release, task.pk, task.workspace_id, claim, leased)
    except Exception:  # the heartbeat stops with the run: the lease and claim go stale anyway
        log.exception("task %s: its claim or workspace lease could not be released", task.pk)


async def end_on_storage_failure(recorder: EventRecorder, task: Task, claim: str | None) -> None:
    """The task's events could not be stored (a second try included): end it `failed` with
    `storage_error` through the minimal write path, and tell its sockets."""
    recorder.abandon()

    def ours(current: Task) -> bool:
        return claim is None or current.run_owner == claim

    try:
        messages = await run_to_completion(
            task_end_now, task.pk, "failed", STORAGE_ERROR, expect=ours, final_too=True
        )
    except Exception:  # the database is gone: the reaper ends it once the heartbeat stops
        log.exception("task %s: even the minimal end could not be written", task.pk)
        recorder.stored_status = None
        return
    # Over whatever the engine's end-of-run hook stored meanwhile (run_task returns this).
    recorder.stored_status = "failed" if messages else None
    if messages:
        await publish(task.pk, messages)


INTERNAL_ERROR = {
    "error_code": "internal_error",
    "message": "agentkit failed while running this task; the server log has the details",
    "suggestions": ["Try again; if it keeps failing, report it with the task id."],
    "retryable": True,
}


async def abort_run(
    recorder: EventRecorder, task: Task, claim: str, error_struct: dict, started: float
) -> None:
    """End a task the engine could not run (or that crashed) the way the engine ends one; when
    even these events cannot be stored, the minimal end (storage_error)."""
    try:
        await _abort(recorder, task, error_struct, started)
    except StorageFailed:
        log.exception("task %s: the end of its run could not be stored", task.pk)
        await end_on_storage_failure(recorder, task, claim)


async def end_unstarted(recorder: EventRecorder, task: Task, status: str) -> None:
    """A run that ends before its engine started (cancelled while it waited for the workspace)."""
    result = TaskResult(task_id=task.pk, status=status)
    await recorder.record("task_finished", result.event_data())
    await run_to_completion(finish_task, task.pk, result)


async def _abort(recorder: EventRecorder, task: Task, error_struct: dict, started: float) -> None:
    """End a task the engine could not run (or that crashed) the way the engine ends one."""
    error_struct = scrub_struct(error_struct, recorder.paths, recorder.secrets)
    if recorder.seq == task.last_seq:  # nothing recorded yet in this run
        await recorder.record("task_started", {"mode": task.mode, "goal": task.goal})
    await close_open_reviews(recorder)  # every review request gets its resolution
    await recorder.record("error", {"step": 0, "fatal": True, "error_struct": error_struct})
    result = TaskResult(task_id=task.pk, status="failed", error=ErrorStruct(**error_struct))
    await recorder.record("task_finished", result.event_data())
    await run_to_completion(finish_task, task.pk, result)  # a cancel now loses none of it
