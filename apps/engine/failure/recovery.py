"""Recovery, the middle tier of the failure chain (fallback.py): the helpers ReActEngine.run()
uses to decide on another attempt after a failed one, to start it (a reflection, then the retry
message), and the last tier, Emergency: the failure as a rule-based structured error, with the
salvage of what the run changed (the editor's diffs outside git, or the Salvager's)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from apps.engine.config import FallbackChainConfig
from apps.engine.events import ErrorStruct, Event
from apps.engine.failure import fallback, structs
from apps.engine.llm.errors import LLMError
from apps.engine.llm.types import ChatRequest, Message, TextBlock
from apps.engine.loop.flow import Failed
from apps.engine.ports import Salvager

if TYPE_CHECKING:
    from apps.engine.loop.state import RunState

log = logging.getLogger(__name__)

RECOVERY_REFLECT = (
    "Your attempt at this task failed: {error}\n"
    "Reflect before trying again. Answer in three short parts, without calling any tool:\n"
    "1. What failed.\n2. Why it failed (the root cause, not the symptom).\n"
    "3. What you will do differently in the next attempt (concrete steps)."
)
RETRY = (
    "Your previous attempt failed: {error}\n{reflection}"
    "Try again now, applying what you learned, and finish with your final answer."
)


def may_recover(config: FallbackChainConfig | None, run: Any) -> bool:
    """Recovery once more? Only react runs (plan_exec has its own reflexion), only a failure
    (never a cancellation), and never beyond recovery.max_retries."""
    return (
        config is not None
        and config.recovery.enabled
        and run.task.mode == "react"
        and run.outcome.status == "failed"
        and run.recoveries < config.recovery.max_retries
    )


def in_emergency(config: FallbackChainConfig | None, run: Any) -> bool:
    return (
        config is not None
        and config.emergency.enabled
        and run.task.mode == "react"
        and run.outcome.status == "failed"
    )


def finished_data(run: Any) -> dict[str, Any]:
    """`recovery_finished` data: how the attempt after the latest Recovery ended."""
    end = run.outcome
    return {
        "attempt": run.recoveries,
        "ok": end.status == "completed",
        "status": end.status,
        "error_struct": end.error.model_dump() if end.error else None,
    }


def reflect_request(
    messages: Sequence[Message], system: tuple[TextBlock, ...], error: ErrorStruct
) -> ChatRequest:
    prompt = RECOVERY_REFLECT.format(error=f"{error.error_code}: {error.message}")
    return ChatRequest((*messages, Message("user", prompt)), system, ())


def retry_message(error: ErrorStruct, reflection: str) -> Message:
    said = f"Your reflection on it:\n{reflection}\n\n" if reflection else ""
    return Message(
        "user", RETRY.format(error=f"{error.error_code}: {error.message}", reflection=said)
    )


def close_dangling_calls(messages: list[Message]) -> None:
    """An attempt stopped mid-tool leaves tool calls without results; providers refuse such a
    context, so each gets an "interrupted" result."""
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "assistant":
            for call in messages[index].tool_calls:
                if call.id not in answered:
                    messages.append(
                        Message(
                            "tool",
                            "ERROR [interrupted] the attempt stopped before this call finished",
                            tool_call_id=call.id,
                            name=call.name,
                            is_error=True,
                        )
                    )
            return


def edits_salvage(edits: Sequence[dict[str, str]]) -> dict[str, Any] | None:
    """The salvage of a run outside git: the files the editor changed, with their diffs."""
    if not edits:
        return None
    files = list(dict.fromkeys(edit["path"] for edit in edits))
    return {"source": "editor", "files": files, "diff": "\n".join(e["diff"] for e in edits)}


async def start_attempt(
    run: RunState,
    ask: Callable[[RunState, ChatRequest], Awaitable[str]],
    config: FallbackChainConfig,
    max_steps: int,
) -> Event:
    """Recovery: a fresh step budget (the caller re-arms the time limit), one reflect call
    (`ask`, on the main model) about the failed attempt, then the retry message, so the next
    attempt continues the same conversation. Returns the `recovery_started` event."""
    close_dangling_calls(run.messages)
    run.detector.reset()
    error = run.failure.error or structs.engine_bug(run.failure)
    run.steps += 1
    text, reflection = "", {"ok": False}
    try:
        text = await ask(run, reflect_request(run.messages, run.system, error))
        reflection = {"ok": True, "text": text}
    except LLMError as exc:
        reflection = {"ok": False, "error": structs.from_llm_error(exc).model_dump()}
    run.max_steps = run.steps + max_steps
    run.messages.append(retry_message(error, text))
    return run.event(
        "recovery_started",
        step=run.steps,
        attempt=run.recoveries,
        max_retries=config.recovery.max_retries,
        error_struct=error.model_dump(),
        reflection=reflection,
    )


async def emergency(run: RunState, config: FallbackChainConfig, salvager: Salvager | None) -> None:
    """Emergency: the failure as a rule-based structured error, and what the run changed."""
    rules = fallback.EmergencyRules.classify(run.outcome, config)
    run.original_error = rules.original_error
    run.outcome = Failed(run.outcome.final, rules.to_struct(), cause=run.outcome.cause)
    run.salvage = edits_salvage(run.edits)
    if salvager is not None:
        try:
            run.salvage = await asyncio.wait_for(salvager(list(run.edits)), 30)
        except Exception:
            log.warning("salvage failed for task %s", run.task.task_id, exc_info=True)
