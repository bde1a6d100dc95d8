"""What goes into a run (`AgentTask`) and what comes out (`TaskResult`).

The Django runner builds an AgentTask from a Task row and its skill; `ReActEngine.execute()` returns
the TaskResult, the lifecycle hooks receive it, and the `task_finished` event carries it as `data`
(less `task_id`), so all three are the same value by construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from apps.engine.events import ErrorStruct, Event, FinalStatus
from apps.engine.llm.types import Message, Usage

EngineMode = Literal["direct_chat", "react", "plan_exec"]


@dataclass(frozen=True, slots=True)
class AgentTask:
    task_id: int | str
    goal: str  # the user's message for this run
    mode: EngineMode = "react"
    history: tuple[Message, ...] = ()  # earlier turns of the conversation, oldest first
    system_prompt: str = ""  # the skill's system prompt (stable across tasks: cached)
    # Per-task material for the volatile block: pitfalls, retrieved memory ... (sections by name)
    context: Mapping[str, str] | str = ""
    tools: tuple[str, ...] | None = None  # names allowed in this run; None = every tool given
    model: str | None = None  # model alias; None = llm.main
    max_steps: int | None = None  # None = react.max_steps
    # Volatile block of the system prompt (prompt.py), filled by the runner:
    pitfalls: str = ""  # "Pitfalls seen before" (evolution's retrieval); "" adds no bytes
    notes: str = ""  # the workspace's AGENTS.md, capped
    facts: Mapping[str, str] = field(default_factory=dict)  # workspace facts (name, ...)
    repo_map: str = ""  # the workspace's outline (paths + definitions), its own cached block

    def __post_init__(self) -> None:
        if self.mode not in ("direct_chat", "react", "plan_exec"):
            raise ValueError(
                f"ReActEngine runs modes direct_chat, react and plan_exec, not {self.mode!r} "
                "(team_collab runs through its own orchestrator)"
            )
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps}")


class UsageTotals(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0  # all prompt tokens, cached ones included
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    llm_calls: int = 0
    estimated: bool = False  # some counts were estimated from text (the server sent none)

    @model_serializer(mode="wrap")
    def _drop_unestimated(self, handler):
        """`estimated` only where it is true: other usage stays as it always was."""
        data = handler(self)
        if not data.get("estimated"):
            data.pop("estimated", None)
        return data

    @classmethod
    def of(cls, usage: Usage, llm_calls: int) -> UsageTotals:
        return cls(**usage.as_dict(), llm_calls=llm_calls)


class VerificationRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    attempt: int
    passed: bool
    errors: list[str] = Field(default_factory=list)
    log: str = ""
    commands: list[str] = Field(default_factory=list)
    summary: str = ""


class TaskResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    task_id: int | str
    status: FinalStatus
    final: str = ""  # the final answer (for a failed verification: the answer that failed)
    steps: int = 0  # model calls made
    usage: UsageTotals = UsageTotals()
    cost: float = 0.0  # USD
    error: ErrorStruct | None = None  # why it failed or was cancelled
    # verified | unverified | no_changes | the failure's error code (state.outcome_of);
    # None: a result made without a run (team_collab's orchestrator sets its own)
    outcome: str | None = None
    verification: list[VerificationRecord] = Field(default_factory=list)
    # plan_exec: the phase counters at the end (apps/engine/plan/phases.py), None in other modes.
    phases: dict[str, Any] | None = None
    # Emergency (fallback.py): what the failed run changed, {"source", "diff", "files"}.
    salvage: dict[str, Any] | None = None
    # Emergency: the failure's own text, for the task's owner; never in an event.
    original_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    def event_data(self, answer_chars: int | None = None) -> dict[str, Any]:
        """The task_finished event's data. `final` longer than `answer_chars` (limits.answer_chars)
        is cut (`answer_fields`), and the whole answer rides along as `final_full`, which the
        runner's event writer takes out and stores as the task's result alone."""
        # `phases` only where there are phases: other modes' events stay as they were.
        exclude = {"task_id", "original_error"}
        if self.phases is None:
            exclude.add("phases")
        if self.salvage is None:  # only where there is salvage: other events stay as they were
            exclude.add("salvage")
        if self.outcome is None:  # a result made without a run (team_collab's own)
            exclude.add("outcome")
        data = self.model_dump(mode="json", exclude=exclude)
        if answer_chars is not None and len(self.final) > answer_chars:
            data.update(answer_fields("final", self.final, answer_chars), final_full=self.final)
        return data

    @classmethod
    def from_event(cls, event: Event) -> TaskResult:
        if event.type != "task_finished":
            raise ValueError(f"expected a task_finished event, got {event.type}")
        data = {**event.data, "task_id": event.task_id}
        if "final_full" in data:  # the answer was cut for the event: the whole one
            data["final"] = data["final_full"]
        return cls.model_validate(data)


def answer_fields(key: str, answer: str, limit: int) -> dict[str, Any]:
    """An answer for an event: `{key: answer}`, or, when it is longer than `limit` characters,
    its first `limit` characters and a marker that says how long it is and where the whole one
    is, with `<key>_truncated: true` and `<key>_chars` (its length)."""
    if len(answer) <= limit:
        return {key: answer}
    marker = ANSWER_CUT_MARKER.format(shown=limit, chars=len(answer))
    return {key: answer[:limit] + marker, f"{key}_truncated": True, f"{key}_chars": len(answer)}


ANSWER_CUT_MARKER = (
    "\n\n[… answer cut here: the first {shown:,} of its {chars:,} characters are shown; the "
    "whole answer is the task's result]"
)
