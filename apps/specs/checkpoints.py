"""Checkpoints and resume of the spec modes (plan_exec, team_collab): the CheckpointStore on the
database, the spec a run executes (or resumes), its heartbeat, and whether a task was
interrupted (its process died mid-run).

A task's run beats for it (apps/tasks/dispatch/liveness.py: one heartbeat thread per process); a task
still `running` (or `awaiting_review`) whose heartbeat is older than
`executor.orphan_after_seconds` has no process left running it, and is resumed by the reaper
(apps/tasks/run/reaper.py), or by a person (`manage.py resume_task`, `POST /api/tasks/<id>/resume`,
the chat page's Resume). team_collab
resumes from its phase checkpoints (finished spec phases are not run again); plan_exec from the
confirmed spec and its stored events (apps/engine/loop/resume.py: no replanning, the engine phase,
budgets and conversation where they were).
"""

from __future__ import annotations

from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from apps.engine.plan.spec import SpecDraft
from apps.engine.ports import PhaseCheckpoint
from apps.specs.models import Checkpoint, Spec, SpecPhase, SpecStatus

RUNNABLE_SPEC_STATUSES = (SpecStatus.CONFIRMED, SpecStatus.EXECUTING)
RESUMABLE_MODES = ("plan_exec", "team_collab")
# Modes a take-over of a dead run (apps/tasks/run/reaper.py) continues from their stored events
# (apps/engine/loop/resume.py): a direct_chat task has one step, its answer, and answers again.
STEP_RESUMABLE_MODES = ("react", "direct_chat")


@dataclass(frozen=True)
class RunnableSpec:
    spec_id: int
    draft: SpecDraft


class DatabaseCheckpoints:
    """ports.CheckpointStore of one task: its newest spec revision (the one it executes). A
    saved team phase also updates its SpecPhase; plan_exec's checkpoints name engine phases
    (planning, building...), which are no spec phases (`spec_phases=False`)."""

    def __init__(self, *, task_id: int, spec_phases: bool = True):
        self.task_id = task_id
        self.spec_phases = spec_phases

    async def save(self, checkpoint: PhaseCheckpoint) -> None:
        await sync_to_async(self._save, thread_sensitive=False)(checkpoint)

    async def load(self) -> list[PhaseCheckpoint]:
        return await sync_to_async(self._load, thread_sensitive=False)()

    def _spec_id(self) -> int | None:
        spec = Spec.objects.filter(task_id=self.task_id).order_by("-revision").first()
        return spec.pk if spec else None

    def _save(self, checkpoint: PhaseCheckpoint) -> None:
        spec_id = self._spec_id()
        if spec_id is None:
            return
        with transaction.atomic():
            Checkpoint.objects.create(
                spec_id=spec_id,
                task_id=self.task_id,
                phase_id=checkpoint.phase_id,
                status=checkpoint.status,
                counters=checkpoint.counters,
                snapshot_ref=checkpoint.snapshot_ref,
            )
            if self.spec_phases:
                SpecPhase.objects.filter(spec_id=spec_id, phase_id=checkpoint.phase_id).update(
                    status=checkpoint.status
                )

    def _load(self) -> list[PhaseCheckpoint]:
        rows = Checkpoint.objects.filter(spec_id=self._spec_id(), task_id=self.task_id)
        return [
            PhaseCheckpoint(row.phase_id, row.status, row.counters, row.snapshot_ref)
            for row in rows.order_by("created_at", "id")
        ]


def runnable_spec(task_id: int) -> RunnableSpec | None:
    """The task's newest spec revision when it is confirmed (or was executing): what a run
    executes — or resumes."""
    spec = Spec.objects.filter(task_id=task_id).order_by("-revision").first()
    if spec is None or spec.status not in RUNNABLE_SPEC_STATUSES:
        return None
    return RunnableSpec(spec.pk, SpecDraft.model_validate(spec.draft))


def run_gone(task) -> bool:
    """No live run holds the task: its heartbeat is older than `executor.orphan_after_seconds`
    or it never had one (apps/tasks/dispatch/liveness.py). A task just handed to a new run (a resume, the
    reaper) has a fresh heartbeat and no owner yet: not gone."""
    from apps.tasks.dispatch.liveness import heartbeat_stale

    return heartbeat_stale(task.heartbeat_at)


def spec_stale(spec: Spec) -> bool:
    """The spec's task has no live run (its process died while the spec waited or ran)."""
    return run_gone(spec.task)


def task_interrupted(task) -> bool:
    """A plan_exec or team_collab task left `running` by a process that is gone: its spec is
    executing and no live run holds the task. (One that died waiting for a review goes on when
    the review is answered: apps/specs/services.spec_review_reply.)"""
    if task.mode not in RESUMABLE_MODES or task.status not in ("running", "queued"):
        return False
    spec = Spec.objects.filter(task_id=task.pk).order_by("-revision").first()
    if spec is None or spec.status != SpecStatus.EXECUTING:
        return False
    return run_gone(task)


def task_resume(*, task, force: bool = False) -> None:
    """Check that `task` may resume from its checkpoints, and hand it over (see below). The
    caller then runs it (executor or in process); the run's claim (apps/tasks/dispatch/liveness.py) makes
    sure only one run goes on."""
    from apps.tasks.dispatch.liveness import orphan_after_seconds
    from apps.tasks.errors import ApplicationError
    from apps.tasks.models import FINAL_STATUSES, Task

    if task.mode not in RESUMABLE_MODES:
        raise ApplicationError(
            f"task {task.pk} is a {task.mode} task; only plan_exec and team_collab tasks resume "
            "from checkpoints — retry it instead",
            {"error_code": "not_resumable"},
        )
    if task.status in FINAL_STATUSES:
        raise ApplicationError(
            f"task {task.pk} already ended ({task.status}); there is nothing to resume",
            {"error_code": "not_resumable"},
        )
    spec = runnable_spec(task.pk)
    if spec is None:
        raise ApplicationError(
            f"task {task.pk} has no confirmed spec to resume from",
            {"error_code": "not_resumable"},
        )
    if not force and not task_interrupted(task):
        raise ApplicationError(
            f"task {task.pk} is still running (its heartbeat is less than "
            f"{orphan_after_seconds():g}s old); wait, or if its process is gone, resume with "
            "--force",
            {"error_code": "task_alive"},
        )
    # Handed to the run the caller starts: no owner (its claim succeeds), a fresh heartbeat (a
    # second resume or a reaper meanwhile finds it alive). With --force the process that held
    # it is known to be gone.
    Task.objects.filter(pk=task.pk).update(
        cancel_requested_at=None, run_owner="", heartbeat_at=timezone.now()
    )


def resume_point_for(task_id: int):
    """plan_exec: where the task's next run goes on from (apps/engine/loop/resume.py), from its
    stored events; None when no step of an earlier run finished."""
    from apps.engine.loop.resume import RESUME_EVENT_TYPES, resume_point
    from apps.tasks.models import TaskEvent

    rows = (
        TaskEvent.objects.filter(task_id=task_id, type__in=RESUME_EVENT_TYPES)
        .order_by("seq")
        .values("type", "data")
    )
    return resume_point(rows.iterator())
