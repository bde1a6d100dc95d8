"""plan_exec's per-call phase gate and the shell's phase hook (both on the engine's hot path).

`gate_call` runs before every tool call of a plan_exec run: it answers `advance_phase`, refuses
what the current phase forbids with a structured `phase_violation`, and lets everything else
through without allocating. The shell's `ToolContext.command_filter` is `active_command_filter`:
the engine binds the current phase's shell filter around each call that runs.
The phase state machine itself (PhaseTracker, PhasePolicy, budgets) is phases.py.
"""

from __future__ import annotations

import json
from collections.abc import Container
from contextvars import ContextVar
from typing import Any

from apps.engine.llm.types import ToolCall
from apps.engine.plan.phases import ADVANCE_TOOL, Events, PhaseTracker, how_to_advance
from apps.engine.tools import ToolResult

_PASS: tuple[None, Events] = (None, ())


# ── the shell's phase hook (ToolContext.command_filter) ────────────────────────────────────────
_active_filter: ContextVar[Any] = ContextVar("agentkit_phase_filter", default=None)


def active_command_filter(command: str) -> str | None:
    """For ToolContext.command_filter: the refusal of the phase the calling run is in (set by
    the engine around each tool call), or None outside plan_exec."""
    check = _active_filter.get()
    return check(command) if check is not None else None


def bind_command_filter(tracker: PhaseTracker | None):
    """Set the filter for the tool call about to run; returns the token to reset it with."""
    return _active_filter.set(tracker.shell_refusal if tracker is not None else None)


# The engine's hot path binds and resets with the ContextVar's own methods (no Python call):
# set_command_filter(tracker.shell_refusal) is bind_command_filter(tracker).
set_command_filter = _active_filter.set
reset_command_filter = _active_filter.reset


def gate_call(
    tracker: PhaseTracker, call: ToolCall, known: Container[str]
) -> tuple[ToolResult | None, Events]:
    """Before dispatch: answer advance_phase, refuse what the phase forbids (a structured
    `phase_violation`). (None, ()) lets the call run; so does a tool not in `known` (the run's
    tools): that is the ordinary unknown_tool error, not a phase matter. Runs every tool call:
    the usual path allocates nothing."""
    name = call.name
    passing = tracker.policy.passing[tracker.phase]  # the usual call first: allowed, not shell
    if name in passing if passing is not None else name != "shell" and name != ADVANCE_TOOL:
        return _PASS
    if name == ADVANCE_TOOL:
        change = tracker.advance("tool")
        if change is None:
            return ToolResult.failure(
                "already_final_phase",
                "already at the final phase (delivery); give your final answer.",
            ), ()
        data = change[1]
        text = f"Now in the {data['phase']} phase. Allowed tools: " + ", ".join(
            data["allowed_tools"]
        )
        return ToolResult.success(text, phase=data["phase"]), [change]
    if name not in known:
        return _PASS
    allowed = tracker.policy.is_tool_allowed(name, tracker.phase)
    refusal = None
    if allowed:
        command = call.arguments.get("command") if isinstance(call.arguments, dict) else None
        if not isinstance(command, str):
            return _PASS
        refusal = tracker.policy.command_refusal(command, tracker.phase)
        if refusal is None:
            return _PASS
    data = violation(tracker, name, refusal)
    extra = {k: v for k, v in data.items() if k not in ("error", "message")}
    result = ToolResult.failure("phase_violation", json.dumps(data, sort_keys=True), **extra)
    return result, [("phase_violation", {"step": tracker.step, "call_id": call.id, **data})]


def violation(tracker: PhaseTracker, tool: str, refusal: str | None = None) -> dict[str, Any]:
    """The structured phase_violation: the tool message's data and the event's."""
    phase = tracker.phase
    message = refusal or (
        f"Tool {tool!r} is not allowed in the {phase.value} phase. Allowed here: "
        f"{', '.join(tracker.policy.allowed_tools(phase))}. {how_to_advance(phase)}"
    )
    return {
        "error": "phase_violation",
        "tool": tool,
        "phase": phase.value,
        "allowed_tools": tracker.policy.allowed_tools(phase),
        "message": message,
        "hint": how_to_advance(phase),
    }
