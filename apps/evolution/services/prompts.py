"""Prompt versions at run time. A task of a skill (or, without a skill, of a mode) runs with its
workspace's active PromptVersion for that target; with `evolution.ab_share` > 0, that share of
tasks (stable hash of the task id) runs the newest approved version as a candidate instead.
Only versions an admin approved or activated ever run. Each run is recorded (PromptRun) and its
outcome filled in when the task ends; admin compares the candidate with the active version."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from django.db import connection
from django.db.models import Avg, Count, Q

from apps.engine.config import EvolutionConfig
from apps.evolution.models import PromptRun, PromptStatus, PromptVersion
from apps.tasks.models import Task, TaskEvent
from apps.tasks.selectors import task_has_rows

SECTION = "Guidance approved for this workspace"


def ab_sampled(task_id: int, share: float) -> bool:
    digest = hashlib.sha256(f"ab:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def target_of(task: Task) -> tuple[str, str]:
    return ("skill", task.skill) if task.skill else ("mode", task.mode)


def prompt_for_task(*, task: Task, config: EvolutionConfig) -> str:
    """The version text this task runs with ("" when none), recorded as a PromptRun."""
    if task.mode == "direct_chat":
        return ""
    kind, name = target_of(task)
    with connection.cursor() as cursor:  # every task start asks; most find none
        cursor.execute(_runnable_sql(), (task.workspace_id, kind, name, *_RUNNABLE))
        rows = cursor.fetchall()  # (id, status), newest first
    active = next((pk for pk, status in rows if status == PromptStatus.ACTIVE), None)
    candidate = next((pk for pk, status in rows if status == PromptStatus.APPROVED), None)
    if candidate is not None and ab_sampled(task.pk, config.ab_share):
        chosen, arm = candidate, PromptRun.Arm.CANDIDATE
    elif active is not None:
        chosen, arm = active, PromptRun.Arm.ACTIVE
    else:
        return ""
    chosen = PromptVersion.objects.get(pk=chosen)
    PromptRun.objects.update_or_create(task=task, defaults={"version": chosen, "arm": arm})
    return chosen.text


_RUNNABLE = (PromptStatus.ACTIVE.value, PromptStatus.APPROVED.value)


@functools.cache
def _runnable_sql() -> str:
    """The ids and statuses of a target's runnable versions, newest first: a statement built
    once, not an ORM query compiled at every task start."""
    qn = connection.ops.quote_name
    meta = PromptVersion._meta
    column = {
        name: qn(meta.get_field(name).column)
        for name in ("id", "workspace", "target_kind", "target_name", "status", "created_at")
    }
    return (
        f"SELECT {column['id']}, {column['status']} FROM {qn(meta.db_table)} "
        f"WHERE {column['workspace']} = %s AND {column['target_kind']} = %s "
        f"AND {column['target_name']} = %s AND {column['status']} IN (%s, %s) "
        f"ORDER BY {column['created_at']} DESC, {column['id']} DESC"
    )


def prompt_run_finish(*, task_id: int, outcome: str) -> None:
    """Fill in how a task that ran with a version ended (no-op for other tasks: one plain
    statement, at the end of every run)."""
    if not task_has_rows(PromptRun, task_id=task_id):
        return
    run = PromptRun.objects.filter(task_id=task_id).first()
    if run is None:
        return
    events = TaskEvent.objects.filter(task_id=task_id)
    last_check = events.filter(type="verification_result").order_by("-seq").first()
    usage = Task.objects.filter(pk=task_id).values_list("usage", flat=True).first() or {}
    run.outcome = outcome
    run.verification_passed = bool(last_check.data.get("passed")) if last_check else None
    run.reflections = events.filter(type="reflection").count()
    run.tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    run.save(update_fields=["outcome", "verification_passed", "reflections", "tokens"])


@dataclass(frozen=True)
class ArmFigures:
    version_id: int
    status: str
    runs: int
    completed: int
    verification_runs: int
    verification_passed: int
    mean_reflections: float
    mean_tokens: float


def prompt_ab_figures(*, version: PromptVersion) -> list[ArmFigures]:
    """Finished runs of this version and of the target's active version, side by side."""
    ids = [version.pk]
    active = (
        PromptVersion.objects.filter(
            workspace_id=version.workspace_id,
            target_kind=version.target_kind,
            target_name=version.target_name,
            status=PromptStatus.ACTIVE,
        )
        .exclude(pk=version.pk)
        .first()
    )
    if active is not None:
        ids.append(active.pk)
    rows = []
    for pk in ids:
        stats = (
            PromptRun.objects.filter(version_id=pk)
            .exclude(outcome="")
            .aggregate(
                runs=Count("id"),
                completed=Count("id", filter=Q(outcome="completed")),
                checked=Count("id", filter=Q(verification_passed__isnull=False)),
                passed=Count("id", filter=Q(verification_passed=True)),
                reflections=Avg("reflections"),
                tokens=Avg("tokens"),
            )
        )
        status = version.status if pk == version.pk else PromptStatus.ACTIVE
        rows.append(
            ArmFigures(
                pk,
                status,
                stats["runs"],
                stats["completed"],
                stats["checked"],
                stats["passed"],
                round(stats["reflections"] or 0, 2),
                round(stats["tokens"] or 0, 1),
            )
        )
    return rows
