"""The final-answer gate of ReActEngine (loop/react.py): an answer is verified when the mode has
verification on, then submitted. A failed verification goes back to the model (re-injection),
then — plan_exec — a reflection and another round (reflexion.py holds the texts and the choice
of the next move), until the run fails or gives up after reflecting."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from apps.engine.config import AgentkitConfig
from apps.engine.events import Event
from apps.engine.failure import structs
from apps.engine.llm.errors import LLMError
from apps.engine.llm.types import ChatRequest, Message
from apps.engine.loop.flow import GaveUp, Redirect, SandboxMissing, Submitted, VerificationFailed
from apps.engine.plan import reflexion
from apps.engine.ports import VerificationOutcome, Verifier
from apps.engine.sandbox import SandboxUnavailable
from apps.engine.task import VerificationRecord, answer_fields

if TYPE_CHECKING:
    from apps.engine.loop.state import RunState

Ask = Callable[["RunState", ChatRequest], Awaitable[str]]


async def finish(
    run: RunState, answer: str, verifier: Verifier | None, config: AgentkitConfig, ask: Ask
) -> AsyncIterator[Event]:
    """Verify `answer` when the run verifies, then submit it (raises Submitted); a failed
    verification raises Redirect or ends the run (see check)."""
    if run.verify:
        try:
            outcome = await run.interrupter.guard(verifier(answer))
        except SandboxUnavailable as exc:
            if not run.verify_implicit:
                raise SandboxMissing(answer, structs.sandbox_unavailable(exc)) from None
            outcome = None  # react_when_changed without a sandbox: the outcome says unverified
        if outcome is not None:
            async for event in check(run, answer, outcome, config, ask):
                yield event
    limit = config.limits.answer_chars  # a longer one is cut here, whole in the task's result
    yield run.event("final_answer", step=run.steps, **answer_fields("text", answer, limit))
    raise Submitted(answer)


async def check(
    run: RunState, answer: str, outcome: VerificationOutcome, config: AgentkitConfig, ask: Ask
) -> AsyncIterator[Event]:
    """Failed → the errors go back to the model (max_reinjections times); then, in
    plan_exec, a reflection and another round while the quota lasts; then the run ends:
    failed with the verification log, or gave_up_after_reflections once it had reflected."""
    limit = config.react.tool_output_max_chars
    record = reflexion.record_of(outcome, len(run.verification) + 1, limit)
    run.verification.append(record)
    move = None if record.passed else reflexion.next_move(record, run.tracker, config)
    reinjected = move is not None and move.action == "reinject"
    yield run.event("verification_result", **record.model_dump(), reinjected=reinjected)
    if move is None:
        return
    run.detector.reset()  # new information: earlier steps no longer say anything about loops
    for kind, data in move.events:
        yield run.event(kind, **data)
    if move.action == "fail":
        raise VerificationFailed(answer, structs.verification_failed(record.attempt, record.errors))
    if move.action == "give_up":
        error = structs.gave_up_after_reflections(run.tracker.reflect_used, record.errors)
        raise GaveUp(answer, error)
    if move.action == "reinject":
        message = reflexion.reinjection(record, limit)
    else:
        event, message = await reflect(run, record, limit, ask)
        yield event
    if run.tracker is not None:
        kind, data = run.tracker.new_round(run.steps)
        yield run.event(kind, **data)
    raise Redirect(message)


async def reflect(
    run: RunState, record: VerificationRecord, limit: int, ask: Ask
) -> tuple[Event, Message]:
    """One reflect call on the main model: a step of no phase. Returns its event and the
    message for the next round; a failed call leaves the verification errors alone."""
    tracker = run.tracker
    tracker.reflect_used += 1
    run.steps = tracker.step = run.steps + 1
    request = reflexion.reflect_request(run.messages, run.system, record, limit)
    try:
        text = await ask(run, request)
        data: dict[str, Any] = {"ok": True, "text": text}
        message = reflexion.reflection_message(text, record, limit)
    except LLMError as exc:
        data = {"ok": False, "error": structs.from_llm_error(exc).model_dump()}
        message = reflexion.reinjection(record, limit)
    counters = tracker.counters()
    event = run.event(
        "reflection", step=run.steps, attempt=tracker.reflect_used, **data, counters=counters
    )
    return event, message
