"""plan_exec phases: the policy (which tools and shell commands each phase allows) and the state
of one run (current phase, step budgets), kept apart from the loop that enforces them.

Phases run in order: planning → building → verification → delivery. Default policy (seed 002
KTD5): planning reads and thinks (shell read-only), building edits, verification tests (shell
read-only), delivery may use every tool. `advance_phase` is allowed in every phase: it is the way
out. `plan_exec:` in agentkit.yaml overrides phase by phase (the override wins).

Budgets (seed 000 R11): each round of work — the first, and each one after a failed
verification — gets `think` steps in planning/building and `verify` steps in verification/
delivery; `reflect` counts reflect calls over the run. Think used up → forced move to
verification; verify used up → the best answer so far goes to the final-answer gate; reflect
used up → no more reflection.

Every event that changes the counters carries them (`counters`, with the step it was taken at), so
`reconstruct(events)` rebuilds the state of an interrupted run (seed 000 KTD-7).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any

from apps.engine.config import LoopDetectionConfig, PhaseBudgets, PlanExecConfig
from apps.engine.llm.types import ToolSpec
from apps.engine.tools import is_glob


class PhaseState(StrEnum):
    PLANNING = "planning"
    BUILDING = "building"
    VERIFICATION = "verification"
    DELIVERY = "delivery"

    @property
    def next(self) -> PhaseState | None:
        order = list(PhaseState)
        index = order.index(self)
        return order[index + 1] if index + 1 < len(order) else None


ORDER = tuple(PhaseState)
LAST = ORDER[-1]
Events = Sequence[tuple[str, dict[str, Any]]]
ADVANCE_TOOL = "advance_phase"
# The engine answers advance_phase itself; apps/tools/builtin/advance_phase.py shows the same spec.
ADVANCE_SPEC = ToolSpec(
    ADVANCE_TOOL,
    "Move to the next phase of the plan (planning -> building -> verification -> delivery) when "
    "the current phase's work is done. Each phase allows its own tools.",
    {
        "type": "object",
        "properties": {
            "summary": {
                "type": "string",
                "description": "What this phase achieved (optional, one or two sentences).",
            }
        },
        "additionalProperties": False,
    },
)
THINK_PHASES = frozenset({PhaseState.PLANNING, PhaseState.BUILDING})

# Shell commands that write: refused where the phase is read-only.
WRITE_COMMANDS = (
    r"(^|[\s;&|(`])(rm|rmdir|mv|cp|dd|truncate|shred|tee|touch|mkdir|ln|chmod|chown|install"
    r"|patch|unzip|tar)(\s|$)"
    r"|>>?(?!&)(?!\s*/dev/null)"
    r"|\bsed\s+(-[a-zA-Z]*i|--in-place)"
    r"|\bgit\s+(commit|checkout|switch|reset|push|pull|merge|rebase|apply|stash|restore|clean"
    r"|am|cherry-pick|add|rm|mv|tag|branch\s+-[dDmM])\b"
    r"|\b(pip3?|uv|poetry|npm|yarn|pnpm)\s+(install|uninstall|add|remove|sync)\b"
    r"|\bpython3?\s+-m\s+pip\s+(install|uninstall)\b"
)

DEFAULT_WHITELISTS: dict[PhaseState, frozenset[str]] = {
    PhaseState.PLANNING: frozenset({"read_file", "search", "shell", "think"}),
    PhaseState.BUILDING: frozenset({"read_file", "search", "shell", "str_replace_editor", "think"}),
    PhaseState.VERIFICATION: frozenset({"read_file", "run_tests", "search", "shell", "think"}),
    PhaseState.DELIVERY: frozenset({"*"}),
}
DEFAULT_FILTERS: dict[PhaseState, str | None] = {
    PhaseState.PLANNING: WRITE_COMMANDS,
    PhaseState.BUILDING: None,
    PhaseState.VERIFICATION: WRITE_COMMANDS,
    PhaseState.DELIVERY: None,
}


@dataclass(frozen=True)
class PhasePolicy:
    whitelist: Mapping[PhaseState, frozenset[str]]
    command_filter: Mapping[PhaseState, re.Pattern[str] | None]
    auto_advance_after_steps: int | None = None
    start_phase: PhaseState = PhaseState.PLANNING
    # Per phase, made once: the tools a call of which passes gate_call with no further check (the
    # whitelist less shell and advance_phase); None where the phase allows every tool ("*").
    passing: Mapping[PhaseState, frozenset[str] | None] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for phase in ORDER:
            if not self.whitelist.get(phase):
                raise ValueError(f"phase {phase.value!r} has an empty whitelist: no tool could run")
        unknown = {str(p) for p in [*self.whitelist, *self.command_filter]} - set(PhaseState)
        if unknown:
            raise ValueError(f"unknown phase(s) {sorted(unknown)}; phases: {', '.join(ORDER)}")
        passing = {
            phase: None if "*" in tools else tools - {"shell", ADVANCE_TOOL}
            for phase, tools in self.whitelist.items()
        }
        object.__setattr__(self, "passing", passing)

    def is_tool_allowed(self, tool: str, phase: PhaseState) -> bool:
        allowed = self.whitelist[phase]
        if tool == ADVANCE_TOOL or "*" in allowed or tool in allowed:
            return True
        # MCP tools by glob (`git__*`); a builtin name has no '__' and never matches one
        return any(is_glob(entry) and fnmatchcase(tool, entry) for entry in allowed)

    def allowed_tools(self, phase: PhaseState) -> list[str]:
        if "*" in self.whitelist[phase]:
            return ["*"]
        return sorted(self.whitelist[phase] | {ADVANCE_TOOL})

    def command_refusal(self, command: str, phase: PhaseState) -> str | None:
        pattern = self.command_filter.get(phase)
        if pattern is None or not pattern.search(command):
            return None
        return (
            f"the {phase.value} phase allows read-only shell commands (ls, cat, grep, git status/"
            f"diff/log, running tests) and this one writes: {command!r}. " + how_to_advance(phase)
        )

    @classmethod
    def from_config(cls, section: PlanExecConfig | None = None) -> PhasePolicy:
        """The default policy with the config's overrides merged over it (override wins)."""
        section = section or PlanExecConfig()
        whitelist = dict(DEFAULT_WHITELISTS)
        filters: dict[PhaseState, str | None] = dict(DEFAULT_FILTERS)
        try:
            for name, tools in section.whitelists.items():
                whitelist[PhaseState(name)] = frozenset(tools)
            for name, pattern in section.command_filters.items():
                filters[PhaseState(name)] = pattern
        except ValueError:
            raise ValueError(f"unknown phase in plan_exec; phases: {', '.join(ORDER)}") from None
        compiled: dict[PhaseState, re.Pattern[str] | None] = {}
        for phase, pattern in filters.items():
            try:
                compiled[phase] = re.compile(pattern) if pattern else None
            except re.error as exc:
                raise ValueError(f"plan_exec.command_filters.{phase}: bad regex: {exc}") from None
        return cls(
            whitelist=whitelist,
            command_filter=compiled,
            auto_advance_after_steps=section.auto_advance_after_steps,
            start_phase=PhaseState(section.start_phase),
        )


def default_policy() -> PhasePolicy:
    return PhasePolicy.from_config(PlanExecConfig(auto_advance_after_steps=None))


def how_to_advance(phase: PhaseState) -> str:
    if phase.next is None:
        return "This is the final phase."
    return f"Call advance_phase to move on to {phase.next.value} when this phase's work is done."


@dataclass(frozen=True, slots=True)
class Budgets:
    think: int
    verify: int
    reflect: int

    @classmethod
    def from_config(cls, section: PhaseBudgets) -> Budgets | None:
        if not section.enabled:
            return None
        return cls(section.think, section.verify, section.reflect)


# ── the state of one run ───────────────────────────────────────────────────────────────────────
@dataclass
class PhaseTracker:
    """Current phase and counters of one run. Methods return events as (type, data) pairs."""

    policy: PhasePolicy
    budgets: Budgets | None = None
    phase: PhaseState = PhaseState.PLANNING
    round: int = 1
    steps_in_phase: int = 0
    think_used: int = 0  # this round
    verify_used: int = 0  # this round
    reflect_used: int = 0  # this run
    step: int = 0  # the run's step number when the counters were last updated
    forced_gate: bool = field(default=False, repr=False)

    @classmethod
    def start(cls, policy: PhasePolicy, budgets: Budgets | None = None) -> PhaseTracker:
        return cls(policy, budgets, policy.start_phase)

    @classmethod
    def for_run(cls, section: PlanExecConfig, policy: PhasePolicy | None = None) -> PhaseTracker:
        """A plan_exec run's start: the given policy (else the config's) and budgets."""
        policy = policy or PhasePolicy.from_config(section)
        return cls.start(policy, Budgets.from_config(section.phase_budgets))

    def counters(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value,
            "round": self.round,
            "step": self.step,
            "steps_in_phase": self.steps_in_phase,
            "think_used": self.think_used,
            "verify_used": self.verify_used,
            "reflect_used": self.reflect_used,
            "budgets": None
            if self.budgets is None
            else {
                "think": self.budgets.think,
                "verify": self.budgets.verify,
                "reflect": self.budgets.reflect,
            },
        }

    def _move(self, phase: PhaseState, reason: str) -> tuple[str, dict[str, Any]]:
        previous, self.phase, self.steps_in_phase = self.phase, phase, 0
        return "phase_changed", {
            "phase": phase.value,
            "previous": previous.value,
            "reason": reason,
            "allowed_tools": self.policy.allowed_tools(phase),
            "counters": self.counters(),
        }

    def advance(self, reason: str = "tool") -> tuple[str, dict[str, Any]] | None:
        """Move to the next phase; None at delivery (already the final phase)."""
        nxt = self.phase.next
        return None if nxt is None else self._move(nxt, reason)

    def begin_step(self, step: int) -> Events:
        """Called before each model step: auto-advance, budgets, then count the step.
        `forced_gate` is set when the verify budget is used up (the best answer goes to the gate
        instead of another model step). Runs every step: the usual path allocates nothing."""
        auto, budgets = self.policy.auto_advance_after_steps, self.budgets
        if self.phase in THINK_PHASES:  # the usual step first: nothing to move or stop
            if (auto is None or self.steps_in_phase < auto) and (
                budgets is None or self.think_used < budgets.think
            ):
                self.step = step
                self.steps_in_phase += 1
                self.think_used += 1
                return ()
        elif (auto is None or self.steps_in_phase < auto or self.phase is LAST) and (
            budgets is None or self.verify_used < budgets.verify
        ):
            self.step = step
            self.steps_in_phase += 1
            self.verify_used += 1
            return ()
        self.step = step - 1
        events: Events = ()
        if auto is not None and self.steps_in_phase >= auto and self.phase is not LAST:
            events = [self._move(self.phase.next, "auto")]
        thinking = self.phase in THINK_PHASES
        if budgets is not None:
            if thinking and self.think_used >= budgets.think:
                events = [
                    *events,
                    self._exhausted("think", budgets.think),
                    self._move(PhaseState.VERIFICATION, "budget"),
                ]
                thinking = False
            if not thinking and self.verify_used >= budgets.verify:
                self.forced_gate = True
                return [*events, self._exhausted("verify", budgets.verify)]
        self.step = step
        self.steps_in_phase += 1
        if thinking:
            self.think_used += 1
        else:
            self.verify_used += 1
        return events

    def shell_refusal(self, command: str) -> str | None:
        """The current phase's verdict on a shell command (the shell tool's phase hook)."""
        return self.policy.command_refusal(command, self.phase)

    def _exhausted(self, budget: str, limit: int) -> tuple[str, dict[str, Any]]:
        return "budget_exhausted", {
            "budget": budget,
            "limit": limit,
            "phase": self.phase.value,
            "counters": self.counters(),
        }

    def may_reflect(self, max_reflections: int) -> tuple[bool, tuple[str, dict] | None]:
        """Whether one more reflection is allowed; the budget_exhausted event when the reflect
        budget (not max_reflections) is what stops it."""
        if self.reflect_used >= max_reflections:
            return False, None
        if self.budgets is not None and self.reflect_used >= self.budgets.reflect:
            return False, self._exhausted("reflect", self.budgets.reflect)
        return True, None

    def new_round(self, step: int) -> tuple[str, dict[str, Any]]:
        """After a failed verification: back to building with fresh think/verify quotas."""
        self.round += 1
        self.think_used = self.verify_used = 0
        self.forced_gate = False
        self.step = step
        return self._move(PhaseState.BUILDING, "retry")


def reconstruct(
    events: Iterable[Any], policy: PhasePolicy, budgets: Budgets | None = None
) -> PhaseTracker:
    """Rebuild a run's PhaseTracker from its events (Event objects or their dicts): the last
    counters snapshot, plus the steps taken after it (they were all in that snapshot's phase)."""
    tracker = PhaseTracker.start(policy, budgets)
    last_step = 0
    for event in events:
        kind = event["type"] if isinstance(event, Mapping) else event.type
        data = event["data"] if isinstance(event, Mapping) else event.data
        if kind == "task_finished" and data.get("phases"):
            snapshot = data["phases"]
        else:
            snapshot = data.get("counters") if kind in COUNTER_EVENTS else None
        if snapshot:  # authoritative at this point of the run
            tracker.phase = PhaseState(snapshot["phase"])
            for name in (
                "round",
                "step",
                "steps_in_phase",
                "think_used",
                "verify_used",
                "reflect_used",
            ):
                setattr(tracker, name, snapshot[name])
            last_step = tracker.step
        elif isinstance(data.get("step"), int):
            last_step = max(last_step, data["step"])
    extra = last_step - tracker.step
    if extra > 0:
        tracker.steps_in_phase += extra
        if tracker.phase in THINK_PHASES:
            tracker.think_used += extra
        else:
            tracker.verify_used += extra
        tracker.step = last_step
    return tracker


COUNTER_EVENTS = frozenset({"phase_changed", "budget_exhausted", "reflection", "task_finished"})


def loop_config(config: LoopDetectionConfig) -> LoopDetectionConfig:
    """plan_exec retries look alike: repeats count as a loop only from 3 on (seed 000 U4)."""
    return config.model_copy(
        update={
            "repeat_threshold": max(config.repeat_threshold, 3),
            "error_threshold": max(config.error_threshold, 3),
        }
    )


PLAN_EXEC_INSTRUCTIONS = (
    "You work in phases, in order: planning (read and think; the shell is read-only), building "
    "(edit files), verification (run the tests; the shell is read-only), delivery (every tool). "
    "A tool the current phase does not allow is refused with ERROR [phase_violation]. Call "
    "advance_phase when a phase's work is done. When the work is finished, reply with your "
    "final answer without calling a tool: the workspace's checks then run, and a failure comes "
    "back to you to fix. Do not stop with unfinished steps."
)
