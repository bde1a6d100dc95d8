"""The only bridge between the engine and Django: builds the engine for a task (model gateway,
tools rooted in the workspace, config, verifier: engine_build.py), runs it, and turns every
engine event into a `TaskEvent` row (contiguous `seq`, the source of truth) and then a message
to channel-layer group `task.<id>`, batched per flush window (recorder.py). Lifecycle hooks set the task's final status;
whatever goes wrong — a bad workspace, an engine bug — the task still ends with an `error` event,
`task_finished`, and a final status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from contextlib import aclosing
from dataclasses import dataclass

from asgiref.sync import sync_to_async

from apps.engine.llm.gateway import Gateway
from apps.engine.llm.types import Usage
from apps.engine.loop.cancellation import CancellationToken
from apps.engine.loop.resume import ResumePoint, phase_checkpoint
from apps.engine.task import AgentTask
from apps.specs import checkpoints as spec_checkpoints
from apps.specs.stage import close_open_reviews, record_missing_resolutions
from apps.tasks import selectors
from apps.tasks.conf import agent_config
from apps.tasks.dispatch.liveness import run_claim
from apps.tasks.events.recorder import EventRecorder, StorageFailed
from apps.tasks.failure import secrets_of
from apps.tasks.models import FINAL_STATUSES, Task
from apps.tasks.ops.observe import ObservedGateway, RunObserver
from apps.tasks.run.cancel_watch import watch_cancel
from apps.tasks.run.engine_build import RunAborted, build_engine, build_team, prepare_agent_task
from apps.tasks.run.llm_clients import http_client_acquire, http_client_release
from apps.tasks.run.run_branch import BranchCommitter, enter_worktree
from apps.tasks.run.run_guard import (
    DEFERRED,
    INTERNAL_ERROR,
    LOST,
    abort_run,
    claim_task,
    end_on_storage_failure,
    end_unstarted,
    release,
    take_workspace,
)

log = logging.getLogger(__name__)


def _load(task_id: int) -> Task | None:
    return Task.objects.select_related("workspace").filter(pk=task_id).first()


async def _watch_cancel(task_id: int, token: CancellationToken) -> None:
    """Cancellation requested through the API or a socket (any process) reaches the engine here
    (one poll for all tasks of this loop: cancel_watch.py)."""
    await watch_cancel(task_id, token)


@dataclass(frozen=True)
class PreparedRun:
    """What a run needs before its engine starts, built in a worker thread before the run is
    spawned (executors.task_submit_many: the tasks sockets just created), so that the run starts
    on the serving loop without waiting for worker threads behind every other starting task."""

    task: Task
    agent_task: AgentTask | None = None
    failure: Exception | None = None  # raised while preparing: run_task reports it
    claim: str | None = None  # the run's claim on the task (liveness.py), taken while preparing


def prepare_run(
    task_id: int, loaded: Task | None = None, repo_maps: dict | None = None
) -> PreparedRun | None:
    """Blocking. None when the task cannot be loaded (run_task then loads it itself).
    `loaded`: the task with its workspace as its creator committed it (not read again);
    `repo_maps`: see repository_map."""
    try:
        task = loaded if loaded is not None else _load(task_id)
    except Exception:
        log.exception("task %s could not be loaded to prepare its run", task_id)
        return None
    if task is None or task.status in FINAL_STATUSES:
        return None
    try:
        claim = run_claim(task.pk)
    except Exception:
        log.exception("task %s could not be claimed while preparing its run", task_id)
        return None
    if claim is None:  # another live run holds it (a re-sent message): run_task says so
        return None
    try:
        return PreparedRun(task, prepare_agent_task(task, agent_config(), repo_maps), claim=claim)
    except Exception as exc:  # RunAborted (a mode not available) or a crash: reported by the run
        return PreparedRun(task, failure=exc, claim=claim)


async def run_task(
    task_id: int,
    prepared: PreparedRun | None = None,
    *,
    resume_reason: str | None = None,
    defer: bool = False,
    observer: RunObserver | None = None,
) -> str:
    """Run one task to its end; returns the final status. Safe to call for a finished task.
    `resume_reason`: why a resumed run resumes, written into its `task_resumed` event (the
    reaper's take-over; None: on request). `defer` (an RQ job): when its workspace or its
    conversation's turn is not free, the task goes back to the queue (deferral.py) and this
    returns `queued` at once. `observer`: metrics and trace of the run (ops/observe.py; one is
    made when none is given)."""
    if prepared is not None:
        task = prepared.task
    else:
        task = await sync_to_async(_load, thread_sensitive=False)(task_id)
    if task is None:
        log.warning("run_task: task %s does not exist", task_id)
        return "missing"
    if task.status in FINAL_STATUSES:
        return task.status
    claim = prepared.claim if prepared is not None else await claim_task(task.pk)
    if claim is None:  # another run holds the task and beats: it is not run twice
        log.info("task %s: another live run holds it; not started again", task_id)
        status = await sync_to_async(selectors.task_status, thread_sensitive=False)(task_id=task_id)
        return status or "missing"
    recorder = EventRecorder(task)
    recorder.observer = observer = observer or RunObserver(task)
    outcome = "other"  # how the run ended, for the metrics
    token = CancellationToken()
    watcher = asyncio.create_task(_watch_cancel(task.pk, token))
    gateway: Gateway | None = None
    http = None  # this loop's client, shared with the other running tasks (llm_clients.py)
    started = time.monotonic()
    leased = False
    try:
        config = agent_config()
        recorder.secrets = secrets_of(config)
        # One writer per workspace.
        taken = await take_workspace(recorder, task, token, claim if defer else None)
        if taken in (DEFERRED, LOST):  # deferred: its next job comes when what it waits for ends
            claim = None  # given back with the task (or lost): nothing to release, nobody to wake
            outcome = "deferred" if taken == DEFERRED else "other"
            return "queued"
        leased = taken is True
        if taken is False:  # cancelled while it waited for the workspace
            await end_unstarted(recorder, task, "cancelled")
            return "cancelled"
        if prepared is not None and prepared.failure is not None:
            raise prepared.failure
        committer = await enter_worktree(task, config, recorder)  # repository workspaces
        if prepared is not None and prepared.agent_task is not None:
            agent_task = prepared.agent_task
        else:
            agent_task = await sync_to_async(prepare_agent_task, thread_sensitive=False)(
                task, config
            )
        http = http_client_acquire(config)
        gateway = ObservedGateway(config, http_client=http, observer=observer)
        point = checkpoints = None
        if task.mode == "plan_exec":  # an interrupted run's state, if any (resume.py)
            point = await sync_to_async(spec_checkpoints.resume_point_for)(task.pk)
            checkpoints = spec_checkpoints.DatabaseCheckpoints(task_id=task.pk, spec_phases=False)
        elif resume_reason is not None and task.mode in spec_checkpoints.STEP_RESUMABLE_MODES:
            # taken over from a dead run: from its stored events
            point = await sync_to_async(spec_checkpoints.resume_point_for)(task.pk)
            point = point or NOTHING_DONE  # no step finished: from the start, said so
        if task.mode == "team_collab":
            stream = build_team(task, config, gateway, recorder).run(agent_task, cancel=token)
        else:
            engine = build_engine(task, config, gateway, point, checkpoints, recorder)
            stream = engine.run(agent_task, cancel=token)
        if task.mode in spec_checkpoints.RESUMABLE_MODES:
            await record_missing_resolutions(recorder)  # reviews answered after a run died
        await _record(recorder, stream, checkpoints, resume_reason or RESUMED_ON_REQUEST, committer)
    except RunAborted as aborted:
        await abort_run(recorder, task, claim, aborted.error_struct, started)
    except StorageFailed:
        log.exception("task %s: its events could not be stored", task_id)
        await end_on_storage_failure(recorder, task, claim)
    except asyncio.CancelledError:
        if not recorder.finished:  # the review the run left open is resolved all the same
            await close_open_reviews(recorder)
        raise
    except Exception:
        log.exception("task %s crashed in the runner", task_id)
        if not recorder.finished:
            await abort_run(recorder, task, claim, INTERNAL_ERROR, started)
    finally:
        try:  # whatever the engine yielded is written, even on a cancel
            await recorder.aclose()
        except StorageFailed:
            log.exception("task %s: its last events could not be stored", task_id)
            await end_on_storage_failure(recorder, task, claim)
        await release(task, claim, leased)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        if gateway is not None:
            await gateway.aclose()
        if http is not None:
            await http_client_release(config, http)
        if outcome != "deferred" and observer.status is not None:  # its task_finished recorded
            outcome = "finished"
        observer.run_ended(outcome, observer.status)
    if recorder.stored_status is not None:  # read by the end-of-run hook, on its trip
        return recorder.stored_status
    # Else read on the shared pool (not on Django's one thread-sensitive thread).
    status = await sync_to_async(selectors.task_status, thread_sensitive=False)(task_id=task_id)
    return status or "missing"


# A react run taken over before any step of the dead run finished: it starts again, and its
# `task_resumed` says why.
NOTHING_DONE = ResumePoint(messages=(), steps=0, usage=Usage(), cost=0.0, llm_calls=0, events=())
RESUMED_ON_REQUEST = "resumed on request (resume_task, the Resume button, a parked spec confirmed)"


async def _record(
    recorder: EventRecorder,
    stream,
    checkpoints=None,
    resume_reason: str = RESUMED_ON_REQUEST,
    committer: BranchCommitter | None = None,
) -> None:
    """Record the run's events (`task_finished` commits with the final status: event_writer.py).
    plan_exec: each phase the run leaves is checkpointed (`phase_changed`). `task_resumed` gets
    `reason`: why this run resumed. On a task's branch (`committer`), a passed phase and the end
    are git commits before their event is stored."""
    async with aclosing(stream) as events:
        async for event in events:
            data = event.data
            if event.type == "task_resumed":
                data = {**data, "reason": resume_reason}
            if committer is not None:
                await committer.at(event.type, data)
            await recorder.record(event.type, data, event.ts)
            if checkpoints is not None and event.type == "phase_changed":
                await checkpoints.save(phase_checkpoint(event.data))
