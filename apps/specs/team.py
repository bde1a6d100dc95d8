"""team_collab's side of apps/specs: the CheckpointStore on the database, the spec a team run
executes, its heartbeat, and whether a task was interrupted (its process died mid-run).

A running team task touches its spec's `updated_at` every HEARTBEAT_SECONDS; a task still
`running` whose executing spec has not been touched for STALE_AFTER_SECONDS has no process left
running it, and may be resumed (`manage.py resume_task`, `POST /api/tasks/<id>/resume`, the
chat page's Resume).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from apps.engine.ports import PhaseCheckpoint
from apps.engine.spec import SpecDraft
from apps.specs.models import Checkpoint, Spec, SpecPhase, SpecStatus

HEARTBEAT_SECONDS = 2.0
STALE_AFTER_SECONDS = 6.0
RUNNABLE_SPEC_STATUSES = (SpecStatus.CONFIRMED, SpecStatus.EXECUTING)


@dataclass(frozen=True)
class TeamSpec:
    spec_id: int
    draft: SpecDraft


class DatabaseCheckpoints:
    """ports.CheckpointStore of one task: its newest spec revision (the one it executes); a
    saved phase also updates its SpecPhase."""

    def __init__(self, *, task_id: int):
        self.task_id = task_id

    async def save(self, checkpoint: PhaseCheckpoint) -> None:
        await sync_to_async(self._save, thread_sensitive=False)(checkpoint)

    async def load(self) -> list[PhaseCheckpoint]:
        return await sync_to_async(self._load, thread_sensitive=False)()

    def _spec_id(self) -> int | None:
        spec = Spec.objects.filter(task_id=self.task_id).order_by("-revision").first()
        return spec.pk if spec else None

    def _save(self, checkpoint: PhaseCheckpoint) -> None:
        spec_id = self._spec_id()
        with transaction.atomic():
            Checkpoint.objects.create(
                spec_id=spec_id,
                task_id=self.task_id,
                phase_id=checkpoint.phase_id,
                status=checkpoint.status,
                counters=checkpoint.counters,
                snapshot_ref=checkpoint.snapshot_ref,
            )
            SpecPhase.objects.filter(spec_id=spec_id, phase_id=checkpoint.phase_id).update(
                status=checkpoint.status
            )

    def _load(self) -> list[PhaseCheckpoint]:
        rows = Checkpoint.objects.filter(spec_id=self._spec_id(), task_id=self.task_id)
        return [
            PhaseCheckpoint(row.phase_id, row.status, row.counters, row.snapshot_ref)
            for row in rows.order_by("created_at", "id")
        ]


def team_spec_for(task_id: int) -> TeamSpec | None:
    """The task's newest spec revision when it is confirmed (or was executing): what a team run
    executes — or resumes."""
    spec = Spec.objects.filter(task_id=task_id).order_by("-revision").first()
    if spec is None or spec.status not in RUNNABLE_SPEC_STATUSES:
        return None
    return TeamSpec(spec.pk, SpecDraft.model_validate(spec.draft))


def spec_heartbeat(*, task_id: int) -> None:
    """The run of the task's executing spec is alive (see team_task_interrupted)."""
    Spec.objects.filter(task_id=task_id, status=SpecStatus.EXECUTING).update(
        updated_at=timezone.now()
    )


def team_task_interrupted(task) -> bool:
    """A team task left `running` by a process that is gone: its executing spec's heartbeat
    stopped more than STALE_AFTER_SECONDS ago."""
    if task.mode != "team_collab" or task.status not in ("running", "queued"):
        return False
    spec = Spec.objects.filter(task_id=task.pk).order_by("-revision").first()
    if spec is None or spec.status != SpecStatus.EXECUTING:
        return False
    return spec.updated_at < timezone.now() - timedelta(seconds=STALE_AFTER_SECONDS)


def task_resume(*, task, force: bool = False) -> None:
    """Check that `task` may resume from its checkpoints, and claim it (a fresh heartbeat, so a
    second resume is refused). The caller then runs it (executor or in process)."""
    from apps.tasks.models import FINAL_STATUSES, Task
    from apps.tasks.services import ApplicationError

    if task.mode != "team_collab":
        raise ApplicationError(
            f"task {task.pk} is a {task.mode} task; only team_collab tasks resume from "
            "checkpoints — retry it instead",
            {"error_code": "not_resumable"},
        )
    if task.status in FINAL_STATUSES:
        raise ApplicationError(
            f"task {task.pk} already ended ({task.status}); there is nothing to resume",
            {"error_code": "not_resumable"},
        )
    spec = team_spec_for(task.pk)
    if spec is None:
        raise ApplicationError(
            f"task {task.pk} has no confirmed spec to resume from",
            {"error_code": "not_resumable"},
        )
    if not force and not team_task_interrupted(task):
        raise ApplicationError(
            f"task {task.pk} is still running (its heartbeat is less than "
            f"{STALE_AFTER_SECONDS:g}s old); wait, or if its process is gone, resume with --force",
            {"error_code": "task_alive"},
        )
    with transaction.atomic():
        Spec.objects.filter(pk=spec.spec_id).update(updated_at=timezone.now())  # claimed
        Task.objects.filter(pk=task.pk).update(cancel_requested_at=None)
