"""plan_exec's per-step phase work in its cheaper forms gives exactly what the plain rules give:
begin_step's usual-step shortcut (checked against the full bookkeeping it skips, over random
tracker states), the call gate's per-phase passing sets (against the policy's whitelist and
shell-filter rules), and the loop-detection config made once per config."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.engine.config import LoopDetectionConfig
from apps.engine.llm.types import ToolCall
from apps.engine.loop import setup as run_setup
from apps.engine.plan.gate import gate_call
from apps.engine.plan.phases import (
    ADVANCE_TOOL,
    LAST,
    THINK_PHASES,
    Budgets,
    PhasePolicy,
    PhaseState,
    PhaseTracker,
    default_policy,
    loop_config,
)


def full_begin_step(tracker: PhaseTracker, step: int):
    """begin_step's rules written out in full, with no shortcut: the reference."""
    tracker.step = step - 1
    events = []
    auto = tracker.policy.auto_advance_after_steps
    if auto is not None and tracker.steps_in_phase >= auto and tracker.phase is not LAST:
        events.append(tracker._move(tracker.phase.next, "auto"))
    budgets = tracker.budgets
    thinking = tracker.phase in THINK_PHASES
    if budgets is not None:
        if thinking and tracker.think_used >= budgets.think:
            events.append(tracker._exhausted("think", budgets.think))
            events.append(tracker._move(PhaseState.VERIFICATION, "budget"))
            thinking = False
        if not thinking and tracker.verify_used >= budgets.verify:
            tracker.forced_gate = True
            return [*events, tracker._exhausted("verify", budgets.verify)]
    tracker.step = step
    tracker.steps_in_phase += 1
    if thinking:
        tracker.think_used += 1
    else:
        tracker.verify_used += 1
    return events


def state(tracker: PhaseTracker) -> tuple:
    return (tracker.counters(), tracker.forced_gate)


@settings(max_examples=400, deadline=None)
@given(
    phase=st.sampled_from(list(PhaseState)),
    auto=st.none() | st.integers(0, 4),
    budgets=st.none() | st.builds(Budgets, st.integers(0, 4), st.integers(0, 4), st.just(1)),
    steps_in_phase=st.integers(0, 5),
    think_used=st.integers(0, 5),
    verify_used=st.integers(0, 5),
    steps=st.integers(1, 6),
)
def test_begin_step_gives_what_the_full_rules_give(
    phase, auto, budgets, steps_in_phase, think_used, verify_used, steps
):
    base = default_policy()
    policy = PhasePolicy(base.whitelist, base.command_filter, auto_advance_after_steps=auto)
    tracker = PhaseTracker(policy, budgets, phase)
    tracker.steps_in_phase, tracker.think_used, tracker.verify_used = (
        steps_in_phase,
        think_used,
        verify_used,
    )
    reference = copy.copy(tracker)
    for step in range(1, steps + 1):  # several steps: through auto-advances and budgets
        events = tracker.begin_step(step)
        expected = full_begin_step(reference, step)
        assert list(events) == expected
        assert state(tracker) == state(reference)
        if tracker.forced_gate:
            break


TOOLS = ("read_file", "shell", "str_replace_editor", "run_tests", "think", "search", "nope")
COMMANDS = ("ls -la", "rm -rf x", "echo hi > f", 42, None)


def gate_rule(policy: PhasePolicy, phase: PhaseState, call: ToolCall, known) -> bool:
    """Whether a call (not advance_phase) passes, from the policy's own rules."""
    if call.name not in known:
        return True  # the ordinary unknown_tool error, not a phase matter
    if not policy.is_tool_allowed(call.name, phase):
        return False
    if call.name != "shell":
        return True
    command = call.arguments.get("command")
    return not isinstance(command, str) or policy.command_refusal(command, phase) is None


POLICIES = (
    default_policy(),
    PhasePolicy(  # a "*" phase that filters the shell, shell and advance_phase whitelisted
        {
            PhaseState.PLANNING: frozenset({"*"}),
            PhaseState.BUILDING: frozenset({"shell", ADVANCE_TOOL, "read_file"}),
            PhaseState.VERIFICATION: frozenset({"run_tests"}),
            PhaseState.DELIVERY: frozenset({"read_file", "*"}),
        },
        {phase: default_policy().command_filter[PhaseState.PLANNING] for phase in PhaseState},
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    policy=st.sampled_from(POLICIES),
    phase=st.sampled_from(list(PhaseState)),
    name=st.sampled_from(TOOLS),
    command=st.sampled_from(COMMANDS),
    known=st.sampled_from([set(TOOLS) - {"nope"}, {"read_file"}, set()]),
)
def test_gate_call_passes_exactly_what_the_policy_allows(policy, phase, name, command, known):
    tracker = PhaseTracker(policy, None, phase)
    call = ToolCall("c1", name, {"command": command})
    result, events = gate_call(tracker, call, known)
    if gate_rule(policy, phase, call, known):
        assert (result, events) == (None, ())
    else:
        assert result.error_code == "phase_violation"
        assert [kind for kind, _ in events] == ["phase_violation"]
    assert tracker.phase is phase  # only advance_phase moves


def test_the_plan_exec_loop_config_is_made_once_per_config_and_equals_a_fresh_one():
    given_config = LoopDetectionConfig(repeat_threshold=2, error_threshold=5)
    made = run_setup._plan_exec_loop_config(given_config)
    assert made == loop_config(given_config)
    assert (made.repeat_threshold, made.error_threshold) == (3, 5)
    assert run_setup._plan_exec_loop_config(given_config) is made
    other = LoopDetectionConfig(repeat_threshold=4)
    assert run_setup._plan_exec_loop_config(other) == loop_config(other)
