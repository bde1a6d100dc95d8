"""plan_exec budgets in the real engine with the scripted model (seed 000 U4): the think, verify
and reflect budgets, the loop-detection threshold and its reset between reflexion attempts, and
phase and budgets rebuilt from a run's events."""

from __future__ import annotations

from apps.engine.plan.phases import reconstruct
from apps.engine.task import AgentTask
from tests.engine.helpers import collect, of_type, types
from tests.engine.plan.plan_exec_support import (
    EDIT,
    FAIL,
    PASS,
    TASK,
    Outcomes,
    call,
    changes,
    engine_for,
    turn,
)


async def test_think_budget_forces_verification_then_verify_budget_sends_the_best_answer(
    workspace,
):
    thinking = [
        turn(call("read_file", path="textkit/slug.py"), text=f"reading {i}") for i in range(3)
    ]
    verifier = Outcomes(PASS)
    cfg = {"plan_exec": {"phase_budgets": {"think": 2, "verify": 1, "reflect": 1}}}
    engine, model, _ = engine_for([*thinking, "never used"], workspace, verifier=verifier, **cfg)
    events = await collect(engine, TASK)

    exhausted = [e.data["budget"] for e in of_type(events, "budget_exhausted")]
    assert exhausted == ["think", "verify"]
    assert ("planning", "verification", "budget") in changes(events)
    # two think steps, one verify step, then the gate with the best answer so far
    assert len(model.requests) == 3
    assert verifier.answers == ["reading 2"]
    assert events[-1].data["status"] == "completed" and events[-1].data["final"] == "reading 2"
    assert (
        events[-1].data["phases"]["think_used"] == 2
        and events[-1].data["phases"]["verify_used"] == 1
    )


async def test_without_budgets_only_max_steps_bounds_the_run(workspace):
    turns = [turn(call("search", pattern=f"t{i}")) for i in range(9)] + ["Done."]
    cfg = {"plan_exec": {"phase_budgets": {"enabled": False}}}
    engine, _, _ = engine_for(turns, workspace, verifier=Outcomes(PASS), **cfg)
    events = await collect(engine, TASK)
    assert not of_type(events, "budget_exhausted")
    assert events[-1].data["status"] == "completed" and events[-1].data["steps"] == 10


async def test_reflect_quota_zero_means_no_reflection_and_a_failed_run(workspace):
    cfg = {"plan_exec": {"phase_budgets": {"reflect": 0}}}
    engine, _, hooks = engine_for(
        ["Done.", "Done again."], workspace, verifier=Outcomes(FAIL), **cfg
    )
    events = await collect(engine, TASK)
    assert not of_type(events, "reflection")
    assert [e.data["budget"] for e in of_type(events, "budget_exhausted")] == ["reflect"]
    assert events[-1].data["status"] == "failed"
    assert events[-1].data["error"]["error_code"] == "verification_failed"
    assert hooks.names == ["on_task_failed"]


async def test_loop_threshold_is_three_in_plan_exec_even_when_react_uses_two(workspace):
    same = turn(call("read_file", path="textkit/slug.py"), repeat=True)
    cfg = {
        "react": {"loop_detection": {"repeat_threshold": 2}},
        "plan_exec": {"phase_budgets": {"enabled": False}},
        "verification": {"modes": {"plan_exec": False}},
    }
    engine, _, _ = engine_for([same], workspace, **cfg)
    events = await collect(engine, TASK)
    warnings = [e for e in of_type(events, "error") if not e.data["fatal"]]
    assert warnings and warnings[0].data["step"] == 3  # two repeats are not a loop, three are

    react_engine, _, _ = engine_for([same], workspace, **cfg)
    react_events = await collect(react_engine, AgentTask(task_id=2, goal="x"))
    react_warnings = [e for e in of_type(react_events, "error") if not e.data["fatal"]]
    assert react_warnings[0].data["step"] == 2


async def test_loop_window_is_reset_between_reflexion_attempts(workspace):
    """Two identical reads before the failure and two after: no loop (the window was reset)."""
    read = call("read_file", path="textkit/slug.py")
    turns = [
        turn(read, match="fix the failing"),
        turn(read, after_tool="read_file", match="slugify"),
        {"text": "Done.", "after_tool": "read_file"},
        {"text": "Reflection: read once, then act.", "match": "Reflect before"},
        turn(read, match="Your reflection"),
        turn(read, after_tool="read_file", match="slugify"),
        {"text": "Done now.", "after_tool": "read_file"},
    ]
    cfg = {
        "verification": {"max_reinjections": 0},
        "react": {"loop_detection": {"repeat_threshold": 3}},
    }
    engine, _, _ = engine_for(turns, workspace, verifier=Outcomes(FAIL, PASS), **cfg)
    events = await collect(engine, TASK)
    assert not of_type(events, "error")
    assert events[-1].data["status"] == "completed"


async def test_a_resumed_run_reconstructs_phase_and_budgets_from_its_events(workspace):
    turns = [
        turn(call("search", pattern="slugify")),
        turn(call("advance_phase")),
        turn(EDIT),
        "Done.",
        {"text": "Reflection.", "match": "Reflect before"},
        {"text": "Done again.", "match": "Your reflection"},
    ]
    cfg = {"verification": {"max_reinjections": 0}}
    engine, _, _ = engine_for(turns, workspace, verifier=Outcomes(FAIL, PASS), **cfg)
    events = await collect(engine, TASK)
    final = events[-1].data["phases"]
    policy_cfg = engine.config.plan_exec
    from apps.engine.plan.phases import Budgets, PhasePolicy

    policy, budgets = (
        PhasePolicy.from_config(policy_cfg),
        Budgets.from_config(policy_cfg.phase_budgets),
    )
    rebuilt = reconstruct([e.as_json() for e in events[:-1]], policy, budgets)
    assert rebuilt.counters() == final
    # cut mid-run (before the reflection): the counters of that moment
    cut = types(events).index("verification_result")
    mid = reconstruct(events[:cut], policy, budgets)
    assert (mid.phase.value, mid.round, mid.think_used, mid.reflect_used) == ("building", 1, 4, 0)
