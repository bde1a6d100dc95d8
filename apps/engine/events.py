"""The one event vocabulary (ARCHITECTURE.md section 4).

Every event is `{"type", "task_id", "seq", "ts", "data"}`. The engine numbers a run's events from 1
in the order it yields them; the Django runner persists them as TaskEvent rows and broadcasts them
unchanged. `ts` is an aware UTC datetime (ISO 8601 in JSON). Clients ignore types they do not know.

What the engine itself emits, with its `data`:

    task_started         mode, model, goal, tools, unavailable_tools, max_steps
    token                step, text            (batched; `restart: true` = drop this step's text)
    reasoning            step, text            (the model's reasoning — Anthropic thinking,
                         `reasoning_content` — batched like token; `restart: true` likewise)
    tool_call            step, call_id, name, arguments  (+ arguments_error when not valid JSON;
                         the step's first call also usage, cost: the run's totals so far)
    tool_result          step, call_id, name, ok, output, error, error_code, data, duration_ms
    verification_result  attempt, passed, errors, log, reinjected
    compression          step, tokens_before, tokens_after, summarized_by, messages_summarized,
                         kept_first, kept_last, failures, agent, task_type  (compressor.py)
    final_answer         step, text  (over limits.answer_chars: cut, with a marker, and
                         text_truncated: true, text_chars: the whole answer's length)
    error                step, fatal, error_struct {error_code, message, suggestions, retryable}
    task_finished        status, final, steps, usage, cost, error, verification, phases
                         (see TaskResult; a `final` over limits.answer_chars is cut as
                         final_answer's text, final_truncated, final_chars, and the whole answer
                         rides along as final_full, which the runner stores as the task's result
                         and takes out of the event)

plan_exec runs (apps/engine/plan/phases.py, apps/engine/plan/reflexion.py) also emit:

    phase_changed        phase, previous, reason (tool|auto|budget|retry), allowed_tools, counters
    phase_violation      step, call_id, tool, phase, allowed_tools, message, hint
    budget_exhausted     budget (think|verify|reflect), limit, phase, counters
    reflection           step, attempt, ok, text (or error), counters

`counters` = {phase, round, step, steps_in_phase, think_used, verify_used, reflect_used,
budgets}: what phases.reconstruct() rebuilds an interrupted run's state from. A plan_exec run
that goes on from an interrupted one (apps/engine/loop/resume.py) emits, after its spec stage:

    task_resumed         phase, steps, restored_messages, llm_calls, counters (+ reason: the runner;
                         + restarted: the reaper, a run started again from the beginning)
react runs with the failure chain (apps/engine/failure/fallback.py, runner-started tasks) also emit:

    recovery_started     step, attempt, max_retries, error_struct (the failed attempt's),
                         reflection {ok, text | error}
    recovery_finished    attempt, ok, status, error_struct (null when ok)

and `task_finished` gains `salvage` {source, diff, files} when an Emergency end salvaged edits.
plan_exec runs with a spec stage (apps/engine/plan/spec_stage.py) emit, between task_started and the
first step:

    spec_review_request  spec_review_id ("<spec_id>:spec_review"), spec_id, revision, goal, spec
                         (the SpecDraft as a dict)
    spec_review_resolved spec_review_id, spec_id, revision, decision (confirmed | rejected |
                         timed_out | cancelled), feedback — exactly one per request

and a run whose review timed out ends with `task_finished` status `parked`.
team_collab runs (apps/engine/team/orchestrator.py) have the same spec stage, then per spec phase:

    phase_started        phase_id, title, role, depends_on, model, tools
    phase_completed      phase_id, title, role, depends_on, status, final, steps, usage, cost
                         (resumed: true for a phase a checkpoint already holds)
    phase_failed         the same with error_struct; a dependent never run: status skipped,
                         failed_dependency, error_struct dependency_failed
    phase_rollback_started    phase_id, title, role, depends_on, command, validation?
    phase_rollback_completed  ... command, passed, exit_code, output, timed_out, duration_ms,
                              snapshot_ref
    phase_rollback_failed     ... the same, checkpoint_saved: false

and each phase's own events (tokens, tool calls, phase_changed ...) with `phase_id` added.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

EventType = Literal[
    "task_started",
    "token",
    "reasoning",
    "tool_call",
    "tool_result",
    "phase_changed",
    "phase_violation",
    "budget_exhausted",
    "verification_result",
    "reflection",
    "task_resumed",
    "spec_review_request",
    "spec_review_resolved",
    "phase_started",
    "phase_completed",
    "phase_failed",
    "phase_rollback_started",
    "phase_rollback_completed",
    "phase_rollback_failed",
    "compression",
    "recovery_started",
    "recovery_finished",
    "final_answer",
    "error",
    "task_finished",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)

TaskStatus = Literal[
    "queued",
    "running",
    "awaiting_review",
    "completed",
    "failed",
    "gave_up_after_reflections",
    "cancelled",
    "parked",
]
# The statuses a run of the engine can end with (parked: its spec review timed out; a later
# decision continues the task in a new run).
FinalStatus = Literal["completed", "failed", "cancelled", "gave_up_after_reflections", "parked"]


EVENT_TYPE_SET = frozenset(EVENT_TYPES)


@dataclass(frozen=True, slots=True)
class Event:
    """One event of a run. Plain data: the engine makes several a step; `__post_init__` refuses
    an unknown type or a seq below 1 (ValueError). `data` is taken as given, not copied: pass a
    dict nothing else will change."""

    type: EventType
    task_id: int | str
    seq: int
    ts: datetime
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in EVENT_TYPE_SET:
            raise ValueError(f"unknown event type {self.type!r}; the known ones: EVENT_TYPES")
        if not isinstance(self.seq, int) or self.seq < 1:
            raise ValueError(f"an event's seq counts from 1, not {self.seq!r}")

    def as_json(self) -> dict[str, Any]:
        """The WebSocket shape: {"type", "task_id", "seq", "ts" (ISO 8601, UTC as Z), "data"}."""
        ts = self.ts.isoformat()
        if ts.endswith("+00:00"):
            ts = ts[: -len("+00:00")] + "Z"
        return {
            "type": self.type,
            "task_id": self.task_id,
            "seq": self.seq,
            "ts": ts,
            "data": self.data,
        }


class ErrorStruct(BaseModel):
    """What went wrong, for people and programs: a stable code, a sentence, what to do next."""

    model_config = ConfigDict(frozen=True)

    error_code: str
    message: str
    suggestions: list[str] = Field(default_factory=list)
    retryable: bool = False


def tool_call_data(step: int, call: Any) -> dict[str, Any]:
    """`tool_call` data of a ToolCall (apps/engine/llm/types.py)."""
    data = {"step": step, "call_id": call.id, "name": call.name, "arguments": call.arguments}
    if call.arguments_error:
        data.update(arguments_error=call.arguments_error, raw_arguments=call.raw_arguments)
    return data


def tool_result_data(step: int, call: Any, result: Any, started: float) -> dict[str, Any]:
    """`tool_result` data of a ToolResult; `started`: time.monotonic() when the call began."""
    return {  # ToolResult.as_dict()'s keys written out: no second dict to merge in
        "step": step,
        "call_id": call.id,
        "name": call.name,
        "ok": result.ok,
        "output": result.output,
        "error": result.error,
        "error_code": result.error_code,
        "data": result.data,
        # milliseconds to 3 decimals: whole microseconds, then / 1000 (round(ms, 3) gives the
        # same but for values within a rounding error of a tie, and costs a decimal conversion)
        "duration_ms": round((time.monotonic() - started) * 1_000_000) / 1000,
    }
