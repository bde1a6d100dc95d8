"""plan_exec phases in the real engine with the scripted model (seed 002 U3): phase enforcement
before dispatch, advance_phase, the shell filter, auto-advance and max_steps mid-phase. Tools are
the real builtin tools on a copy of the demo workspace."""

from __future__ import annotations

import json

from apps.engine.llm.types import ToolCall
from tests.engine.helpers import collect, of_type, types
from tests.engine.plan.plan_exec_support import (
    EDIT,
    PASS,
    TASK,
    Outcomes,
    call,
    changes,
    engine_for,
    tools_in,
    turn,
)


async def test_each_phase_runs_its_own_tools_and_advance_phase_walks_all_four(workspace):
    turns = [
        turn(call("search", pattern="slugify")),
        turn(call("advance_phase", summary="found it")),
        turn(EDIT),
        turn(call("advance_phase")),
        turn(call("shell", command="grep -c separator textkit/slug.py")),
        turn(call("advance_phase")),
        turn(call("think", thought="all good")),
        "Fixed slugify.",
    ]
    cfg = {"plan_exec": {"phase_budgets": {"verify": 4}}}
    engine, model, hooks = engine_for(turns, workspace, verifier=Outcomes(PASS), **cfg)
    events = await collect(engine, TASK)

    assert changes(events) == [
        ("planning", "building", "tool"),
        ("building", "verification", "tool"),
        ("verification", "delivery", "tool"),
    ]
    results = of_type(events, "tool_result")
    assert [(r.data["name"], r.data["ok"]) for r in results] == [
        ("search", True),
        ("advance_phase", True),
        ("str_replace_editor", True),
        ("advance_phase", True),
        ("shell", True),
        ("advance_phase", True),
        ("think", True),
    ]
    assert 'r"[^a-zA-Z0-9]+"' in (workspace / "textkit" / "slug.py").read_text()
    assert not of_type(events, "phase_violation")
    assert (
        events[-1].data["status"] == "completed"
        and events[-1].data["phases"]["phase"] == "delivery"
    )
    # the model is offered advance_phase, the same sorted tool list every step
    offered = {tuple(t.name for t in r.tools) for r in model.requests}
    assert len(offered) == 1 and "advance_phase" in next(iter(offered))
    assert hooks.names == ["on_task_complete"]


async def test_advance_phase_at_delivery_answers_already_at_the_final_phase(workspace):
    cfg = {"plan_exec": {"start_phase": "delivery"}}
    engine, _, _ = engine_for(
        [turn(call("advance_phase")), "Done."], workspace, verifier=Outcomes(PASS), **cfg
    )
    events = await collect(engine, TASK)
    result = of_type(events, "tool_result")[0].data
    assert result["ok"] is False and result["error_code"] == "already_final_phase"
    assert "already at the final phase" in result["error"]
    assert not of_type(events, "phase_changed")


async def test_a_tool_the_phase_forbids_is_not_run_and_the_model_gets_a_structured_violation(
    workspace,
):
    turns = [
        turn(EDIT),
        turn(call("advance_phase"), after_tool="str_replace_editor", tool_error=True),
        turn(EDIT, after_tool="advance_phase"),
        "Fixed.",
    ]
    engine, model, _ = engine_for(turns, workspace, verifier=Outcomes(PASS))
    before = (workspace / "textkit" / "slug.py").read_text()
    events = await collect(engine, TASK)

    violation = of_type(events, "phase_violation")[0].data
    assert violation["tool"] == "str_replace_editor" and violation["phase"] == "planning"
    assert "advance_phase" in violation["allowed_tools"] and "advance_phase" in violation["hint"]
    assert violation["step"] == 1
    message = model.requests[1].messages[-1]
    assert message.role == "tool" and message.is_error
    assert message.content.startswith("ERROR [phase_violation]: ")
    payload = json.loads(message.content.removeprefix("ERROR [phase_violation]: "))
    assert payload["error"] == "phase_violation" and payload["phase"] == "planning"
    # not dispatched in planning; the same call went through once in building
    assert types(events).index("phase_violation") < types(events).index("phase_changed")
    assert before != (workspace / "textkit" / "slug.py").read_text()
    assert events[-1].data["steps"] == 4  # the refused call was a step like any other


async def test_shell_command_that_writes_is_refused_in_planning(workspace):
    target = workspace / "README.md"
    turns = [turn(call("shell", command="rm README.md")), "I will not delete anything."]
    engine, _, _ = engine_for(turns, workspace, verifier=Outcomes(PASS))
    events = await collect(engine, TASK)
    violation = of_type(events, "phase_violation")[0].data
    assert violation["tool"] == "shell" and "read-only" in violation["message"]
    assert target.exists()


async def test_the_shell_tool_itself_consults_the_phase_filter(workspace):
    """Defense in depth: the ToolContext hook refuses a write even past the engine's check."""
    from apps.engine.plan.gate import bind_command_filter, reset_command_filter
    from apps.engine.plan.phases import PhaseTracker, default_policy

    shell = next(t for t in tools_in(workspace) if t.name == "shell")
    token = bind_command_filter(PhaseTracker.start(default_policy()))
    try:
        result = await shell.execute(command="rm README.md")
    finally:
        reset_command_filter(token)
    assert result.error_code == "command_not_allowed" and (workspace / "README.md").exists()


async def test_unknown_tool_is_the_ordinary_error_not_a_phase_matter(workspace):
    engine, _, _ = engine_for(
        [turn(call("write_file", path="x")), "Ok."], workspace, verifier=Outcomes(PASS)
    )
    events = await collect(engine, TASK)
    assert of_type(events, "tool_result")[0].data["error_code"] == "unknown_tool"
    assert not of_type(events, "phase_violation")


def test_gate_call_lets_unknown_tools_through_to_the_ordinary_error():
    from apps.engine.plan.gate import gate_call
    from apps.engine.plan.phases import PhaseTracker, default_policy

    tracker = PhaseTracker.start(default_policy())
    assert gate_call(tracker, ToolCall("c1", "nope", {}), known={"read_file"}) == (None, ())


async def test_auto_advance_moves_on_after_n_steps_in_a_phase(workspace):
    turns = [turn(call("think", thought=f"t{i}")) for i in range(4)] + ["Done."]
    cfg = {
        "plan_exec": {"auto_advance_after_steps": 3},
        "verification": {"modes": {"plan_exec": False}},
    }
    engine, _, _ = engine_for(turns, workspace, **cfg)
    events = await collect(engine, TASK)
    change = of_type(events, "phase_changed")[0]
    assert (change.data["previous"], change.data["phase"], change.data["reason"]) == (
        "planning",
        "building",
        "auto",
    )
    # it happens at the start of the 4th step: after three tool calls, before the 4th
    assert [e.type for e in events if e.type in ("tool_call", "phase_changed")][:4] == [
        "tool_call",
        "tool_call",
        "tool_call",
        "phase_changed",
    ]


async def test_max_steps_mid_phase_ends_as_max_steps_exceeded(workspace):
    turns = [turn(call("think", thought=f"t{i}"), repeat=False) for i in range(5)]
    engine, _, hooks = engine_for(turns, workspace, react={"max_steps": 3})
    events = await collect(engine, TASK)
    assert events[-1].data["status"] == "failed"
    assert events[-1].data["error"]["error_code"] == "max_steps_exceeded"
    assert hooks.names == ["on_task_failed"]
