"""The texts and sums of a team_collab run (orchestrator.py): what each expert is asked, the
errors that end a team task, and the task's totals over its phases."""

from __future__ import annotations

from typing import Any

from apps.engine.events import ErrorStruct
from apps.engine.failure import structs
from apps.engine.plan.spec import PhaseSpec, SpecDraft
from apps.engine.ports import PhaseCheckpoint
from apps.engine.task import AgentTask, TaskResult, UsageTotals
from apps.engine.team.rollback import SnapshotError

RESULT_MAX_CHARS = 4000


def phase_goal(spec: SpecDraft, phase: PhaseSpec, finals: dict[str, str]) -> str:
    """The user message of a phase's run: the team's goal, this phase, what its dependencies
    reported (their final answers), and the acceptance criteria."""
    parts = [f"Team goal: {spec.goal}"]
    if spec.summary:
        parts.append(f"Plan: {spec.summary}")
    parts.append(
        f"Your phase, as the {phase.role}: {phase.id} — {phase.title}"
        + (f"\n{phase.instructions}" if phase.instructions else "")
    )
    earlier = [
        f"- {dep} ({spec.phase(dep).role}): {_cut(finals.get(dep, ''))}" for dep in phase.depends_on
    ]
    if earlier:
        parts.append("What the phases before yours reported:\n" + "\n".join(earlier))
    if spec.acceptance_criteria:
        parts.append(
            "Acceptance criteria of the whole task:\n"
            + "\n".join(f"- {item}" for item in spec.acceptance_criteria)
        )
    parts.append("Do only this phase; other experts do the rest. End with what you did.")
    return "\n\n".join(parts)


def _cut(text: str) -> str:
    text = text.strip() or "(no answer)"
    return text if len(text) <= RESULT_MAX_CHARS else text[:RESULT_MAX_CHARS] + " [...]"


def summary_answer(spec: SpecDraft, finals: dict[str, str]) -> str:
    """The task's answer: each finished phase's, in spec order."""
    return "\n\n".join(
        f"{p.id} ({p.role}): {finals[p.id].strip()}" for p in spec.phases if finals.get(p.id)
    )


def totals(results: dict[str, TaskResult]) -> dict[str, Any]:
    """steps, usage, cost and verification summed over the phases' runs."""
    usage = {key: 0 for key in UsageTotals.model_fields}
    for result in results.values():
        for key, value in result.usage.model_dump().items():
            usage[key] += value
    return {
        "steps": sum(r.steps for r in results.values()),
        "usage": UsageTotals(**usage),
        "cost": sum(r.cost for r in results.values()),
        "verification": [record for r in results.values() for record in r.verification],
    }


def setup_error(code: str, message: str, suggestion: str) -> ErrorStruct:
    return ErrorStruct(error_code=code, message=message, suggestions=[suggestion])


def phase_error(code: str, message: str) -> ErrorStruct:
    return ErrorStruct(error_code=code, message=message)


def dependency_failed(phase_id: str, failed: str) -> ErrorStruct:
    return ErrorStruct(
        error_code="dependency_failed",
        message=f"phase {phase_id!r} was not run: it depends on phase {failed!r}, which failed",
    )


def phases_failed(
    spec: SpecDraft, status: dict[str, str], results: dict[str, TaskResult]
) -> ErrorStruct:
    """Why a team task failed: the phases that failed (with their own errors) and those that
    were never run because of them."""
    ran = [p for p in spec.phases if status[p.id] == "failed" and p.id in results]
    skipped = [p.id for p in spec.phases if status[p.id] == "failed" and p.id not in results]
    reasons = []
    for phase in ran:
        error = results[phase.id].error
        reasons.append(f"{phase.id} ({phase.role}): {error.message if error else 'failed'}")
    message = "team_collab: phase(s) failed — " + "; ".join(reasons)
    if skipped:
        message += f". Not run because a dependency failed: {', '.join(skipped)}"
    first = results[ran[0].id].error if ran else None
    return ErrorStruct(
        error_code="phase_failed",
        message=message,
        suggestions=[
            "Read the failed phase's events (phase_failed) for what went wrong; fix the cause "
            "or revise the spec, then run the task again.",
            *(first.suggestions if first else []),
        ],
        retryable=bool(first and first.retryable),
    )


def with_planning(result: TaskResult, planning: TaskResult | None) -> TaskResult:
    """The task's result with the planner's model usage added (the spec stage's calls)."""
    if planning is None:
        return result
    usage = {
        key: value + getattr(planning.usage, key)
        for key, value in result.usage.model_dump().items()
    }
    return result.model_copy(
        update={"usage": UsageTotals(**usage), "cost": result.cost + planning.cost}
    )


def phase_data(phase: PhaseSpec) -> dict[str, Any]:
    return {
        "phase_id": phase.id,
        "title": phase.title,
        "role": phase.role,
        "depends_on": list(phase.depends_on),
    }


def result_data(result: TaskResult) -> dict[str, Any]:
    data = {
        "status": result.status,
        "final": result.final,
        "steps": result.steps,
        "usage": result.usage.model_dump(mode="json"),
        "cost": result.cost,
    }
    if result.error is not None:
        data["error_struct"] = result.error.model_dump()
    return data


def result_of_checkpoint(task: AgentTask, checkpoint: PhaseCheckpoint) -> TaskResult:
    counters = checkpoint.counters
    return TaskResult(
        task_id=task.task_id,
        status="completed",
        final=str(counters.get("final", "")),
        steps=int(counters.get("steps", 0)),
        usage=UsageTotals.model_validate(counters.get("usage") or {}),
        cost=float(counters.get("cost", 0.0)),
    )


def crashed_result(task: AgentTask, crash: BaseException | None) -> TaskResult:
    if isinstance(crash, SnapshotError):
        error = phase_error("snapshot_failed", str(crash))
    else:
        error = structs.engine_bug(crash or RuntimeError("the phase ended without a result"))
    return TaskResult(task_id=task.task_id, status="failed", error=error)
