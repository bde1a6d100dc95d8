"""The quality loop's texts and checks, kept out of the loop: what a verification failure looks
like to the model, the reflect call (seed 000 R4, KTD-2), and the "keep working until done" check
(R10).

Reflexion as retry: when verification fails, its re-injections are used up and reflections
remain, the engine resets its loop detector (KTD-9), asks the main model one question without
tools — what failed, why, what to do differently, with the verification log as evidence — and
injects the answer before the next round of work. A reflect call that fails leaves the context as
it is and the round starts with the verification errors alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from apps.engine.config import AgentkitConfig
from apps.engine.llm.types import ChatRequest, ChatResponse, Message, TextBlock
from apps.engine.ports import VerificationOutcome
from apps.engine.task import VerificationRecord
from apps.engine.tools import truncate_output

EMPTY_REPLY = "Your reply was empty. Call a tool to make progress, or give your final answer."
CUT_OFF_REPLY = (
    "Your reply was cut off at the output-token limit, so it cannot be the final answer. Give a "
    "shorter final answer, or call a tool."
)
NO_ANSWER = "(no final answer was written before the verify budget ran out)"

REFLECT_PROMPT = (
    "Reflect before trying again. Your final answer failed verification; the evidence is below.\n"
    "Answer in three short parts, without calling any tool:\n"
    "1. What failed (the exact check and error).\n"
    "2. Why it failed (the root cause in the code, not the symptom).\n"
    "3. What you will do differently in the next attempt (concrete steps).\n\n"
    "Verification errors:\n{errors}\n\nVerification log:\n{log}"
)

FINISH_REQUEST = (
    "Your answer says the work is not finished ({reason}). Do not stop here: finish the "
    "remaining steps, make the checks pass, then give your final answer."
)

# A final answer that itself says the work is unfinished (R10).
_UNFINISHED = (
    (re.compile(r"(?im)^\s*[-*]\s*\[ \]"), "it lists unchecked steps"),
    (
        re.compile(
            r"(?i)\b(tests?|checks?|pytest|ruff|lint)\b[^.\n]{0,40}\b(still|continue to)\s+"
            r"(fail|failing|break|broken|error)"
        ),
        "it says checks still fail",
    ),
    (
        re.compile(r"(?i)\b(remaining|next|outstanding|unfinished|pending)\s+(steps|tasks|work)\b"),
        "it lists remaining steps",
    ),
    (re.compile(r"(?i)\b(TODO|not (yet )?(done|finished|implemented))\b"), "it says not done"),
)


def not_an_answer(reply: ChatResponse) -> str | None:
    """Why a reply without tool calls cannot be a final answer (react, plan_exec), or None."""
    if reply.finish_reason == "length":
        return CUT_OFF_REPLY
    if not reply.content.strip():
        return EMPTY_REPLY
    return None


def unfinished(answer: str) -> str | None:
    """Why `answer` reads as unfinished work, or None."""
    for pattern, reason in _UNFINISHED:
        if pattern.search(answer):
            return reason
    return None


def finish_request(reason: str) -> Message:
    return Message("user", FINISH_REQUEST.format(reason=reason))


def record_of(outcome: VerificationOutcome, attempt: int, limit: int) -> VerificationRecord:
    return VerificationRecord(
        attempt=attempt,
        passed=outcome.passed,
        errors=list(outcome.errors),
        log=truncate_output(outcome.log, limit),
        commands=list(outcome.commands),
        summary=outcome.summary,
    )


def _errors(record: VerificationRecord) -> str:
    return "\n".join(f"- {error}" for error in record.errors) or "- (no details given)"


def reinjection(record: VerificationRecord, limit: int) -> Message:
    """The verification failure as the model's next user message."""
    return Message(
        "user",
        truncate_output(
            f"Verification of your final answer failed:\n{_errors(record)}\n\nFix these "
            "problems, then give your final answer again.",
            limit,
        ),
    )


def reflect_request(
    messages: Sequence[Message],
    system: tuple[TextBlock, ...],
    record: VerificationRecord,
    limit: int,
) -> ChatRequest:
    """The reflect call: the run's context plus the question, no tools offered."""
    prompt = REFLECT_PROMPT.format(
        errors=_errors(record), log=truncate_output(record.log or "(empty)", limit // 2)
    )
    return ChatRequest((*messages, Message("user", truncate_output(prompt, limit))), system, ())


def reflection_message(text: str, record: VerificationRecord, limit: int) -> Message:
    return Message(
        "user",
        truncate_output(
            f"Verification failed:\n{_errors(record)}\n\nYour reflection on it:\n{text.strip()}"
            "\n\nApply it now: fix the cause, then give your final answer.",
            limit,
        ),
    )


@dataclass(frozen=True, slots=True)
class NextMove:
    """What follows a failed verification, and the events that say why."""

    action: Literal["reinject", "reflect", "fail", "give_up"]
    events: tuple[tuple[str, dict[str, Any]], ...] = ()


def next_move(record: VerificationRecord, tracker: Any, config: AgentkitConfig) -> NextMove:
    """Re-inject while verification.max_reinjections lasts; then (plan_exec, `tracker` given)
    reflect while reflexion.max_reflections and the reflect budget last; then give up if the run
    reflected at all, else fail."""
    if record.attempt <= config.verification.max_reinjections:
        return NextMove("reinject")
    if tracker is None or not config.reflexion.enabled:
        return NextMove("fail")
    allowed, exhausted = tracker.may_reflect(config.reflexion.max_reflections)
    events = (exhausted,) if exhausted else ()
    if allowed:
        return NextMove("reflect", events)
    return NextMove("give_up" if tracker.reflect_used else "fail", events)
