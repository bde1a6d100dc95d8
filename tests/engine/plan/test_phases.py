"""The plan_exec phase policy and state (seed 002 U2; seed 000 U4 KTD-7): default whitelists,
overrides merged over them, load-time errors with the YAML path, the shell filter, budgets, and
rebuilding the state of a run from its events."""

from __future__ import annotations

import pytest

from apps.engine.config import ConfigError, PlanExecConfig, parse_config
from apps.engine.plan.gate import active_command_filter, bind_command_filter, reset_command_filter
from apps.engine.plan.phases import (
    PhasePolicy,
    PhaseState,
    PhaseTracker,
    default_policy,
    reconstruct,
)

P, B, V, D = (
    PhaseState.PLANNING,
    PhaseState.BUILDING,
    PhaseState.VERIFICATION,
    PhaseState.DELIVERY,
)


def test_default_policy_has_four_phases_in_order_with_the_seed_whitelists():
    policy = default_policy()
    assert list(PhaseState) == [P, B, V, D]
    assert {"search", "read_file", "think", "shell"} <= policy.whitelist[P]
    assert "str_replace_editor" in policy.whitelist[B]
    assert "run_tests" in policy.whitelist[V]
    assert policy.whitelist[D] == frozenset({"*"})
    assert policy.start_phase is P and policy.auto_advance_after_steps is None


@pytest.mark.parametrize(
    ("tool", "phase", "allowed"),
    [
        ("search", P, True),
        ("str_replace_editor", P, False),
        ("str_replace_editor", B, True),
        ("str_replace_editor", V, False),
        ("run_tests", V, True),
        ("run_tests", P, False),
        ("anything_at_all", D, True),
        ("advance_phase", P, True),
        ("advance_phase", V, True),
    ],
)
def test_is_tool_allowed_follows_the_phase_whitelist(tool, phase, allowed):
    assert default_policy().is_tool_allowed(tool, phase) is allowed


def test_empty_whitelist_is_refused_at_construction():
    policy = default_policy()
    with pytest.raises(ValueError, match="'building' has an empty whitelist"):
        PhasePolicy({**policy.whitelist, B: frozenset()}, policy.command_filter)


def test_override_merges_over_the_default_and_wins():
    section = PlanExecConfig(
        whitelists={"planning": ["read_file", "str_replace_editor"]},
        command_filters={"building": "^git push"},
        auto_advance_after_steps=5,
        start_phase="building",
    )
    policy = PhasePolicy.from_config(section)
    assert policy.whitelist[P] == {"read_file", "str_replace_editor"}
    assert policy.is_tool_allowed("str_replace_editor", P)
    assert not policy.is_tool_allowed("search", P)  # the override replaced the phase's list
    assert policy.whitelist[V] == default_policy().whitelist[V]  # untouched phases keep theirs
    assert policy.command_refusal("git push origin", B) is not None
    assert policy.command_refusal("rm -rf build", P) is not None  # default filter kept
    assert policy.auto_advance_after_steps == 5 and policy.start_phase is B


def test_config_with_plan_exec_section_populates_fields():
    cfg = parse_config({"plan_exec": {"auto_advance_after_steps": 5}})
    assert cfg.plan_exec.auto_advance_after_steps == 5
    assert parse_config({}).plan_exec.whitelists == {}  # nothing overridden by default


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"whitelists": {"explore": ["read_file"]}}, "plan_exec.whitelists.explore: unknown phase"),
        ({"whitelists": {"building": []}}, "plan_exec.whitelists.building: empty whitelist"),
        (
            {"whitelists": {"building": ["read_file", "write_file"]}},
            "plan_exec.whitelists.building.1: unknown tool 'write_file'",
        ),
        (
            {"command_filters": {"planning": "(rm"}},
            "plan_exec.command_filters.planning: invalid regular expression",
        ),
        (
            {"command_filters": {"deliver": None}},
            "plan_exec.command_filters.deliver: unknown phase",
        ),
        ({"start_phase": "explore"}, "plan_exec.start_phase"),
    ],
)
def test_bad_plan_exec_config_fails_at_load_with_the_yaml_path(section, message):
    with pytest.raises(ConfigError) as info:
        parse_config({"plan_exec": section})
    assert message in str(info.value)


@pytest.mark.parametrize(
    "command",
    [
        "rm file.py",
        "mv a.py b.py",
        "cp a.py b.py",
        "echo x > notes.txt",
        "cat a >> b",
        "ls | tee out.txt",
        "sed -i 's/a/b/' f.py",
        "git commit -m wip",
        "git checkout -- .",
        "git reset --hard",
        "git push",
        "pip install requests",
        "cd src && touch x",
    ],
)
def test_planning_and_verification_refuse_shell_commands_that_write(command):
    policy = default_policy()
    for phase in (P, V):
        refusal = policy.command_refusal(command, phase)
        assert refusal and "read-only" in refusal and "advance_phase" in refusal
    assert policy.command_refusal(command, B) is None


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "cat textkit/slug.py",
        "grep -rn slugify .",
        "git status",
        "git diff",
        "git log --oneline -n 5",
        "pytest -x -q 2>&1",
        "python -m pytest 2>/dev/null",
        "find . -name '*.py'",
    ],
)
def test_read_only_shell_commands_pass_the_filter(command):
    assert default_policy().command_refusal(command, P) is None


def test_the_shell_tools_phase_hook_sees_the_current_phase_only_while_bound():
    tracker = PhaseTracker.start(default_policy())
    assert active_command_filter("rm x") is None  # outside a plan_exec tool call
    token = bind_command_filter(tracker)
    try:
        assert "planning phase" in active_command_filter("rm x")
        tracker.advance()
        assert active_command_filter("rm x") is None  # building may write
    finally:
        reset_command_filter(token)
    assert active_command_filter("rm x") is None


def test_advance_is_sequential_and_stops_at_delivery():
    tracker = PhaseTracker.start(default_policy())
    seen = []
    while (change := tracker.advance()) is not None:
        kind, data = change
        assert kind == "phase_changed" and data["reason"] == "tool"
        seen.append((data["previous"], data["phase"]))
    assert seen == [
        ("planning", "building"),
        ("building", "verification"),
        ("verification", "delivery"),
    ]
    assert tracker.phase is D


def test_reconstruct_rebuilds_phase_and_budget_counters_from_events():
    from apps.engine.plan.phases import Budgets

    budgets = Budgets(think=7, verify=2, reflect=1)
    live = PhaseTracker.start(default_policy(), budgets)
    events = []
    for step in range(1, 4):  # three planning steps, then an advance during step 3
        for kind, data in live.begin_step(step):
            events.append({"type": kind, "data": data})
        events.append({"type": "tool_call", "data": {"step": step}})
    kind, data = live.advance()
    events.append({"type": kind, "data": data})
    for step in (4, 5):
        live.begin_step(step)
        events.append({"type": "token", "data": {"step": step}})
    live.reflect_used, live.step = 1, 6  # the engine's reflect call: a step of no phase
    events.append({"type": "reflection", "data": {"step": 6, "counters": live.counters()}})

    rebuilt = reconstruct(events, default_policy(), budgets)
    assert rebuilt.counters() == live.counters()
    assert (rebuilt.phase, rebuilt.think_used, rebuilt.reflect_used) == (B, 5, 1)


def test_reconstruct_counts_steps_after_the_last_snapshot_in_its_phase():
    live = PhaseTracker.start(default_policy())
    kind, data = live.advance()
    events = [{"type": kind, "data": data}] + [
        {"type": "tool_call", "data": {"step": s}} for s in (1, 2, 3)
    ]
    rebuilt = reconstruct(events, default_policy())
    assert (rebuilt.phase, rebuilt.steps_in_phase, rebuilt.think_used) == (B, 3, 3)
