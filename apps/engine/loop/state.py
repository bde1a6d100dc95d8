"""RunState: the state of one ReActEngine run (loop/react.py), passed to the helpers that work on it
(recovery.py, verification_gate.py, loop/compression.py). The engine itself keeps none,
so runs may overlap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from apps.engine.context.compressor import PromptSize
from apps.engine.events import Event, EventType
from apps.engine.failure import structs
from apps.engine.llm.types import ChatResponse, Message, TextBlock, ToolSpec, Usage
from apps.engine.loop.cancellation import Interrupter
from apps.engine.loop.detection import LoopDetector
from apps.engine.loop.flow import Cancelled, Finished
from apps.engine.loop.streaming import DeltaBatcher
from apps.engine.plan.phases import PhaseTracker
from apps.engine.task import AgentTask, TaskResult, UsageTotals, VerificationRecord
from apps.engine.tools import ToolSet


@dataclass(eq=False, slots=True)
class RunState:
    """The state of one run. The engine itself keeps none, so runs may overlap."""

    task: AgentTask
    tools: ToolSet = field(default_factory=ToolSet)
    specs: tuple[ToolSpec, ...] = ()  # what the model is offered: the same bytes every step
    unavailable_tools: list[str] = field(default_factory=list)
    system: tuple[TextBlock, ...] = ()
    messages: list[Message] = field(default_factory=list)
    prompt_size: PromptSize = field(default_factory=PromptSize)  # compression's running count
    compress_above: int | None = None  # the compressor's threshold for the run's model, once known
    max_steps: int = 1
    verify: bool = False
    detector: LoopDetector = field(default_factory=LoopDetector)
    interrupter: Interrupter | None = None
    batcher: DeltaBatcher = field(default_factory=lambda: DeltaBatcher(0))  # set up with the config
    reasoning_batcher: DeltaBatcher = field(default_factory=lambda: DeltaBatcher(0))  # likewise
    cleanups: list[Callable[[], object]] = field(default_factory=list)
    seq: int = 0
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    llm_calls: int = 0
    reply: ChatResponse | None = None
    verification: list[VerificationRecord] = field(default_factory=list)
    outcome: Finished | None = None
    tracker: PhaseTracker | None = None  # plan_exec only
    best_answer: str = ""  # the last text the model wrote (plan_exec: the forced gate's answer)
    nudged: bool = False  # an unfinished-looking answer was sent back once (R10)
    overflow_compressed: bool = False  # compressed once after the server's context overflow
    verify_implicit: bool = False  # verifying by react_when_changed (no sandbox: skipped)
    tool_choice: str | None = None  # "required": every step a tool call, final_answer included
    step_temperature: float | None = None  # the steps' temperature where the alias sets none
    cuts: int = 0  # replies cut as runaway (loop/runaway.py)
    repetition_guard: bool = True
    tool_nudged: bool = False  # a prose reply with the work undone was sent back once
    acted: bool = False  # some tool ran in this run
    # a tool that may write (anything but the readers; the editor counts by its diffs) ran
    may_have_changed: bool = False
    nudge_prose: bool = False  # prose with the work undone gets one nudge (not scripted models)
    recoveries: int = 0  # Recovery attempts made (recovery.py)
    failure: Finished | None = None  # the failed attempt Recovery works on
    edits: list[dict[str, str]] = field(default_factory=list)  # the editor's diffs, in order
    salvage: dict[str, Any] | None = None  # Emergency: what the run changed
    original_error: str | None = None  # Emergency: the failure's own text (owner only)

    def event(self, type: EventType, **data: Any) -> Event:
        # type, seq and ts are the engine's own; `data` is a fresh dict (kwargs)
        return self.event_of(type, data)

    def event_of(self, type: EventType, data: dict[str, Any]) -> Event:
        """event(type, **data) without copying `data`: a fresh dict the caller gives away."""
        self.seq += 1
        return Event(type, self.task.task_id, self.seq, datetime.now(UTC), data)

    @property
    def changed(self) -> bool:
        """Whether the run changed the workspace (an edit), or may have (a command ran)."""
        return bool(self.edits) or self.may_have_changed

    def usage_so_far(self) -> dict[str, int]:
        """UsageTotals.of(usage, llm_calls).model_dump(), without building the model."""
        usage = self.usage
        data = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "llm_calls": self.llm_calls,
        }
        if usage.estimated:
            data["estimated"] = True
        return data

    def result(self) -> TaskResult:
        end = self.outcome or Cancelled(error=structs.interrupted())
        return TaskResult(
            task_id=self.task.task_id,
            status=end.status,
            final=end.final,
            steps=self.steps,
            usage=UsageTotals.of(self.usage, self.llm_calls),
            cost=self.cost,
            error=end.error,
            outcome=outcome_of(end, self.verification, self.changed),
            verification=self.verification,
            phases=self.tracker.counters() if self.tracker else None,
            salvage=self.salvage,
            original_error=self.original_error,
        )


# Tools that never change the workspace (the editor's changes are counted by their diffs).
READ_ONLY_TOOLS = frozenset(
    {"read_file", "search", "think", "run_tests", "str_replace_editor", "advance_phase"}
)


def outcome_of(end: Finished, verification: list[VerificationRecord], changed: bool) -> str:
    """What a run came to, in one word (`TaskResult.outcome`): `verified` (its checks ran and the
    last passed), `unverified` (it changed files and ran no check), `no_changes` (it changed
    nothing), or — not completed — the failure's error code (else its status)."""
    if end.status == "completed":
        if verification and verification[-1].passed:
            return "verified"
        return "unverified" if changed else "no_changes"
    return end.error.error_code if end.error is not None else end.status
