"""Recovery, the middle tier of the failure chain (fallback.py): the helpers ReActEngine.run()
uses to decide on another attempt after a failed one, to ask for a reflection, to retry, and
the salvage of a run's edits outside git."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apps.engine.config import FallbackChainConfig
from apps.engine.events import ErrorStruct
from apps.engine.llm.types import ChatRequest, Message, TextBlock

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
