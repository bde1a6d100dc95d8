"""The spec stage of plan_exec: plan → store → review → (replan) → the confirmed spec goes to the
model. `ReActEngine.run()` runs it after `task_started` and before the first step (`prelude`),
so its events share the run's numbering and its ends (parked, cancelled, failed) go through the
run's one `finally`.

- The planner (planner.py) drafts revision 1 from the goal and the retrieved pitfalls.
- The gate (ports.ReviewGate) stores it and opens a review: `spec_review_request`; the run waits
  for a decision from any process, at most `spec_review.timeout_seconds`.
- confirmed → the spec is executing; its text joins the goal and its verification commands join
  the verifier's (`on_confirmed`). rejected → the planner drafts the next revision from the
  rejected one and the feedback, and that one is reviewed. No decision in time → `timed_out`,
  the spec is parked and the run ends `parked` (not failed).
- Every request gets exactly one `spec_review_resolved`: on cancellation (`cancelled`) and on a
  failure while waiting too. (A run killed outright leaves the review pending; the runner
  resolves it as cancelled when it records the end.)
- A continuation run (a parked spec confirmed or rejected later) starts from the stored spec:
  confirmed → straight to execution, no replanning; rejected → the next revision.
- `spec_review.enabled: false`: the first draft is confirmed without a review.

`run` is the engine's RunState; another caller (team_collab's orchestrator) may pass any object
with the same few attributes: task (goal, mode, pitfalls), interrupter (cancel + wall time for
the planner call), usage/cost/llm_calls (the planner's are added), event(type, **data) and
messages (the last one is the goal; the confirmed spec is appended to it). After the stage,
`stage.confirmed` is the StoredSpec being executed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from apps.engine.config.specs import SpecReviewConfig
from apps.engine.events import Event
from apps.engine.failure.structs import cancelled as cancelled_error
from apps.engine.llm.types import Message
from apps.engine.loop.cancellation import CancellationToken, Interrupter
from apps.engine.loop.flow import Cancelled, Failed, Finished, Parked
from apps.engine.plan.planner import Planner, PlannerFailed
from apps.engine.plan.spec import SpecDraft
from apps.engine.ports import ReviewDecision, ReviewGate, StoredSpec

REVIEWABLE = frozenset({"draft", "pending_review", "parked"})
EXECUTABLE = frozenset({"confirmed", "executing"})


class SpecStage:
    def __init__(
        self,
        planner: Planner,
        gate: ReviewGate,
        config: SpecReviewConfig | None = None,
        *,
        on_confirmed: Callable[[SpecDraft], None] | None = None,
    ):
        self.planner = planner
        self.gate = gate
        self.config = config or SpecReviewConfig()
        self.on_confirmed = on_confirmed
        self.confirmed: StoredSpec | None = None

    async def __call__(self, run: Any, cancel: CancellationToken | None) -> AsyncIterator[Event]:
        """Yields the stage's events; returns with the spec confirmed and given to the model,
        or raises Finished (Parked, Cancelled, Failed) to end the run."""
        spec = await self.gate.latest()
        while spec is None or spec.status not in EXECUTABLE:
            if spec is None or spec.status == "rejected":
                spec = await self._plan(run, spec)
            if spec.status not in REVIEWABLE:
                raise Failed(error=_unusable(spec))
            if not self.config.enabled:  # no review: the draft is the plan
                await self.gate.set_status(spec.spec_id, "confirmed")
                break
            outcome: list[ReviewDecision] = []
            async for event in self._review(run, spec, cancel, outcome):
                yield event
            decision = outcome[0]
            if decision.decision == "timed_out":
                await self.gate.set_status(spec.spec_id, "parked")
                raise Parked(final=f"spec revision {spec.revision} is parked awaiting review")
            if decision.decision == "cancelled":  # resolved so before this run waited on it
                raise Cancelled(error=cancelled_error("the spec review was cancelled"))
            spec = await self.gate.latest()  # confirmed, or rejected with its feedback
        await self.gate.set_status(spec.spec_id, "executing")
        self.confirmed = spec
        self._give_to_model(run, spec)

    async def _plan(self, run: Any, rejected: StoredSpec | None) -> StoredSpec:
        try:
            result = await run.interrupter.guard(
                self.planner.draft(
                    run.task.goal,
                    mode=run.task.mode,
                    pitfalls=run.task.pitfalls,
                    previous=rejected.draft if rejected else None,
                    feedback=rejected.feedback if rejected else "",
                )
            )
        except PlannerFailed as failed:
            if (spent := failed.spent) is not None:  # the replies that were no spec still count
                run.usage += spent.usage
                run.cost += spent.cost
                run.llm_calls += spent.llm_calls
            raise Failed(error=failed.error) from None
        run.usage += result.usage
        run.cost += result.cost
        run.llm_calls += result.llm_calls
        return await self.gate.store(result.draft)

    async def _review(
        self,
        run: Any,
        spec: StoredSpec,
        cancel: CancellationToken | None,
        outcome: list[ReviewDecision],
    ) -> AsyncIterator[Event]:
        review_id = await self.gate.open(spec.spec_id)
        yield run.event(
            "spec_review_request",
            spec_review_id=review_id,
            spec_id=spec.spec_id,
            revision=spec.revision,
            goal=spec.draft.goal,
            spec=spec.draft.model_dump(mode="json"),
        )
        # Waiting for a person is not work: only cancellation interrupts it, not the wall time.
        waiting = Interrupter()
        unsubscribe = (
            cancel.subscribe(
                lambda reason: waiting.interrupt(lambda: Cancelled(error=cancelled_error(reason)))
            )
            if cancel is not None
            else (lambda: None)
        )
        failure: BaseException | None = None
        try:
            if cancel is not None and cancel.cancelled:
                raise Cancelled(error=cancelled_error(cancel.reason or "cancelled"))
            decision = await waiting.guard(self.gate.wait(review_id, self.config.timeout_seconds))
            if decision is None:
                decision = await self.gate.close(review_id, "timed_out")
        except (Finished, Exception) as exc:  # cancelled, or the gate failed: resolve it first
            failure = exc
            decision = await self.gate.close(review_id, "cancelled")
        finally:
            unsubscribe()
        outcome.append(decision)
        yield run.event(
            "spec_review_resolved",
            spec_review_id=review_id,
            spec_id=spec.spec_id,
            revision=spec.revision,
            decision=decision.decision,
            feedback=decision.feedback,
        )
        if failure is not None:
            raise failure

    def _give_to_model(self, run: Any, spec: StoredSpec) -> None:
        """The confirmed spec joins the goal (the run's last message); its verification
        commands join the verifier's."""
        goal = run.messages[-1]
        run.messages[-1] = Message("user", f"{goal.content}\n\n{render_spec(spec)}")
        if self.on_confirmed is not None:
            self.on_confirmed(spec.draft)


def render_spec(spec: StoredSpec) -> str:
    draft = spec.draft
    lines = [f"Confirmed spec (revision {spec.revision}); follow it:"]
    if draft.summary:
        lines.append(f"Summary: {draft.summary}")
    lines.append("Phases:")
    for number, phase in enumerate(draft.phases, 1):
        after = f"; after {', '.join(phase.depends_on)}" if phase.depends_on else ""
        lines.append(f"{number}. [{phase.id}] {phase.title} (role {phase.role}{after})")
        if phase.instructions:
            lines.append(f"   {phase.instructions}")
        if phase.validation_command:
            lines.append(f"   check: {phase.validation_command}")
    if draft.verification_commands:
        lines.append("Verification commands (run at your final answer): ")
        lines[-1] += json.dumps(draft.verification_commands)
    if draft.acceptance_criteria:
        lines.append("Acceptance criteria:")
        lines += [f"- {item}" for item in draft.acceptance_criteria]
    return "\n".join(lines)


def _unusable(spec: StoredSpec):
    from apps.engine.events import ErrorStruct

    return ErrorStruct(
        error_code="spec_not_runnable",
        message=f"spec revision {spec.revision} is {spec.status}; it cannot be reviewed or run",
        suggestions=["Send the message again to plan a new spec."],
    )
