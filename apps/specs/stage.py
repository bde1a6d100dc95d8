"""The runner's side of the spec stage: builds it for a task (planner on the main model, the
database review gate) and resolves the reviews a run left open. Called from apps/tasks/run/runner.py,
the one bridge between engine events and the database."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from apps.engine.config import AgentkitConfig
from apps.engine.config.team import team_templates
from apps.engine.plan.planner import Planner
from apps.engine.plan.spec import SpecDraft
from apps.engine.plan.spec_stage import SpecStage
from apps.specs.gate import DatabaseReviewGate
from apps.specs.selectors import spec_reviews_unrecorded
from apps.specs.services import spec_reviews_close_pending

SPEC_MODES = ("plan_exec", "team_collab")


def spec_stage_for(task, config: AgentkitConfig, model, *, commands: list[str]) -> SpecStage | None:
    """plan_exec's spec stage for `task`, or None for modes without one. A confirmed spec's
    verification commands are appended to `commands` (the verifier's list)."""
    if task.mode not in SPEC_MODES:
        return None

    def add_commands(draft: SpecDraft) -> None:
        commands.extend(c for c in draft.verification_commands if c not in commands)

    skill = config.skills.get(task.skill) if task.skill else None
    planner = Planner(
        model,
        model_alias=task.model or (skill.model if skill else None) or None,  # the task's model
        max_attempts=config.planner.max_attempts,
        max_tokens=config.planner.max_tokens,
        roles=_roles(task, config),
        temperature=config.react.step_temperature,
    )
    gate = DatabaseReviewGate(task.pk, config.spec_review)
    return SpecStage(planner, gate, config.spec_review, on_confirmed=add_commands)


def _roles(task, config: AgentkitConfig) -> tuple[str, ...]:
    """team_collab: the experts of the team template the planner may give phases to."""
    if task.mode != "team_collab":
        return ("coder",)
    template = team_templates(config.team, config.experts).get(config.team.template)
    return tuple(template.experts) if template else ("coder",)


async def close_open_reviews(recorder) -> None:
    """Resolve as cancelled the reviews of the task still pending, each with its
    `spec_review_resolved` event (a run that crashed or was stopped while waiting)."""
    closed = await sync_to_async(spec_reviews_close_pending, thread_sensitive=False)(
        task_id=recorder.task_id
    )
    for review in closed:
        await _record_resolution(recorder, review, "")


async def record_missing_resolutions(recorder) -> None:
    """Before a run: a review the last run asked for and that was answered after that run's
    process died gets its `spec_review_resolved` now (one per request, on every path)."""
    missing = await sync_to_async(spec_reviews_unrecorded, thread_sensitive=False)(
        task_id=recorder.task_id
    )
    for review in missing:
        await _record_resolution(recorder, review, review.feedback)


async def _record_resolution(recorder, review, feedback: str) -> None:
    await recorder.record(
        "spec_review_resolved",
        {
            "spec_review_id": review.review_id,
            "spec_id": review.spec_id,
            "revision": review.spec.revision,
            "decision": review.decision,
            "feedback": feedback,
        },
    )
