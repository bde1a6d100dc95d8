"""plan_exec in the real engine with the scripted model (seed 002 U3; seed 000 U3–U5): phase
enforcement before dispatch, advance_phase, auto-advance, the shell filter, step budgets,
verification on by default, reflexion as retry, gave_up_after_reflections, keep working until
done, sandbox_unavailable. Tools are the real builtin tools on a copy of the demo workspace."""

from __future__ import annotations

import json
import shutil

import pytest

from apps.engine.llm.types import ToolCall
from apps.engine.plan.phases import reconstruct
from apps.engine.ports import VerificationOutcome
from apps.engine.sandbox import INSTALL_HINT, SandboxUnavailable
from apps.engine.task import AgentTask, TaskResult
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import available_tool_names, build_tools
from tests.engine.helpers import HookRecorder, collect, config, of_type, scripted_engine, types
from tests.support import ROOT

TASK = AgentTask(task_id=1, goal="fix the failing test", mode="plan_exec")
FAIL = VerificationOutcome(
    passed=False,
    errors=("tests/test_slug.py::test_runs_of_separators_collapse FAILED",),
    log="=== 1 failed, 2 passed ===\nAssertionError: 'hello-world!' != 'hello-world'",
    commands=("pytest -x -q", "ruff check"),
)
PASS = VerificationOutcome(passed=True, log="=== 3 passed ===", commands=("pytest -x -q",))


class Outcomes:
    """The Verifier port, answering with the given outcomes in order (the last one repeats)."""

    def __init__(self, *outcomes: VerificationOutcome):
        self.outcomes = list(outcomes)
        self.answers: list[str] = []

    async def __call__(self, answer: str) -> VerificationOutcome:
        self.answers.append(answer)
        return self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "demo"
    shutil.copytree(ROOT / "demo" / "workspace", root)
    return root


def tools_in(root):
    from apps.engine.plan.gate import active_command_filter

    ctx = ToolContext(root=root, command_filter=active_command_filter)
    return build_tools(ctx, available_tool_names())


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def turn(*calls, text="", **conditions):
    return {"text": text or "step", "tool_calls": list(calls), **conditions}


def engine_for(turns, root, *, verifier=None, **sections):
    sections.setdefault("streaming", {"flush_interval_ms": 0})
    hooks = HookRecorder()
    engine, model = scripted_engine(
        turns, tools=tools_in(root), cfg=config(**sections), verifier=verifier, hooks=hooks
    )
    return engine, model, hooks


def changes(events):
    return [
        (e.data["previous"], e.data["phase"], e.data["reason"])
        for e in of_type(events, "phase_changed")
    ]


EDIT = call(
    "str_replace_editor",
    command="str_replace",
    path="textkit/slug.py",
    old_str='r"[^a-zA-Z0-9]"',
    new_str='r"[^a-zA-Z0-9]+"',
)


# ── phases (seed 002 U3) ────────────────────────────────────────────────────────────────────────
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


# ── budgets (seed 000 U4) ───────────────────────────────────────────────────────────────────────
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


# ── verification, reflexion, keep working (seed 000 U3, U5, R10) ───────────────────────────────
def test_verification_is_on_by_default_for_plan_exec_and_team_collab_only():
    cfg = config()
    assert [
        m
        for m in ("direct_chat", "react", "plan_exec", "team_collab")
        if cfg.verification_enabled(m)
    ] == [
        "plan_exec",
        "team_collab",
    ]
    assert cfg.reflexion.max_reflections == 2


async def test_plan_exec_verifies_the_final_answer_without_any_config(workspace):
    verifier = Outcomes(PASS)
    engine, _, _ = engine_for(["Fixed."], workspace, verifier=verifier)
    events = await collect(engine, TASK)
    assert verifier.answers == ["Fixed."]
    assert of_type(events, "verification_result")[0].data["passed"] is True


async def test_failed_verification_reflects_then_retries_and_passes(workspace):
    """AE1: fails, re-injected, fails again, one reflect call, the retry passes."""
    turns = [
        "Fixed.",
        {"text": "Fixed, really.", "match": "^Verification of your final answer failed"},
        {
            "text": "It failed because I only guessed; next I read the test.",
            "match": "Reflect before",
        },
        {"text": "Fixed after reflecting.", "match": "Your reflection on it"},
    ]
    verifier = Outcomes(FAIL, FAIL, PASS)
    engine, model, hooks = engine_for(turns, workspace, verifier=verifier)
    events = await collect(engine, TASK)

    assert verifier.answers == ["Fixed.", "Fixed, really.", "Fixed after reflecting."]
    verification = [
        (e.data["passed"], e.data["reinjected"]) for e in of_type(events, "verification_result")
    ]
    assert verification == [(False, True), (False, False), (True, False)]
    reflection = of_type(events, "reflection")[0].data
    assert reflection["ok"] is True and reflection["attempt"] == 1
    assert reflection["text"].startswith("It failed because")
    reflect_request = model.requests[2]
    assert reflect_request.tools == ()  # the reflect call offers no tool
    question = reflect_request.messages[-1].content
    assert "What failed" in question and "'hello-world!' != 'hello-world'" in question  # the log
    retry = model.requests[3].messages[-1].content
    assert "Your reflection on it:\nIt failed because" in retry
    assert events[-1].data["status"] == "completed"
    assert events[-1].data["phases"]["reflect_used"] == 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # no hidden tokens
    assert not [e for e in events if e.type == "token" and e.data["step"] == 3]  # reflect call
    assert hooks.names == ["on_task_complete"]
    assert "retry" in [c[2] for c in changes(events)]


async def test_still_failing_after_max_reflections_gives_up_never_completed(workspace):
    turns = [
        {"text": "Attempt.", "role": "user", "repeat": True, "match": "fix the failing|failed:"},
        {"text": "Reflection.", "match": "Reflect before", "repeat": True},
        {"text": "Attempt after reflecting.", "match": "Your reflection", "repeat": True},
    ]
    cfg = {"plan_exec": {"phase_budgets": {"reflect": 2}}, "reflexion": {"max_reflections": 2}}
    engine, _, hooks = engine_for(turns, workspace, verifier=Outcomes(FAIL), **cfg)
    result_events = await collect(engine, TASK)

    assert len(of_type(result_events, "reflection")) == 2
    assert len(of_type(result_events, "verification_result")) == 4  # 1 + reinjection + 2 retries
    finished = result_events[-1].data
    assert finished["status"] == "gave_up_after_reflections"
    assert finished["error"]["error_code"] == "gave_up_after_reflections"
    assert of_type(result_events, "error")[-1].data["fatal"] is True
    result = TaskResult.from_event(result_events[-1])
    assert result.status == "gave_up_after_reflections" and not result.ok
    # the failure hook fires (evolution learns from it), with the gave-up status
    assert hooks.names == ["on_task_failed"]
    assert hooks.calls[0][1].status == "gave_up_after_reflections"


async def test_a_failed_reflect_call_retries_with_the_existing_context(workspace):
    turns = [
        "Fixed.",
        {
            "text": "Still fixed.",
            "match": "^Verification of your final answer failed",
            "repeat": False,
        },
        {"fail": "auth", "match": "Reflect before"},
        {"text": "Fixed for good.", "match": "^Verification of your final answer failed"},
    ]
    engine, model, _ = engine_for(turns, workspace, verifier=Outcomes(FAIL, FAIL, PASS))
    events = await collect(engine, TASK)
    reflection = of_type(events, "reflection")[0].data
    assert (
        reflection["ok"] is False
        and reflection["error"]["error_code"] == "llm_authentication_failed"
    )
    assert (
        model.requests[-1]
        .messages[-1]
        .content.startswith("Verification of your final answer failed")
    )
    assert events[-1].data["status"] == "completed"


async def test_an_answer_that_lists_unfinished_steps_is_sent_back_once(workspace):
    unfinished = "Changed the regex.\n\nRemaining steps:\n- [ ] run the tests"
    turns = [unfinished, {"text": unfinished, "match": "not finished"}]
    verifier = Outcomes(PASS)
    engine, model, _ = engine_for(turns, workspace, verifier=verifier)
    events = await collect(engine, TASK)
    request = model.requests[1].messages[-1]
    assert request.role == "user" and "not finished" in request.content
    assert verifier.answers == [unfinished]  # the second time it goes to the gate: once only
    assert events[-1].data["status"] == "completed"


@pytest.mark.parametrize(
    "answer",
    ["Done, but the tests still fail on unicode input.", "TODO: handle accents", "Not done yet."],
)
async def test_answers_saying_the_work_is_not_done_are_recognised(answer):
    from apps.engine.plan.reflexion import unfinished

    assert unfinished(answer)
    assert unfinished("Fixed slugify; all tests pass.") is None


async def test_sandbox_missing_at_verification_is_a_clear_error_not_an_engine_bug(workspace):
    async def no_sandbox(answer):
        raise SandboxUnavailable(INSTALL_HINT)

    engine, _, hooks = engine_for(["Fixed."], workspace, verifier=no_sandbox)
    events = await collect(engine, TASK)
    error = events[-1].data["error"]
    assert events[-1].data["status"] == "failed"
    assert error["error_code"] == "sandbox_unavailable"
    assert any("apt-get install bubblewrap" in s for s in error["suggestions"])
    assert "bug" not in json.dumps(error)
    assert hooks.names == ["on_task_failed"]


async def test_real_verifier_with_an_unavailable_backend_reports_sandbox_unavailable(
    workspace, monkeypatch
):
    from apps.engine import sandbox as sandbox_module
    from apps.engine.plan.verify.run import Verifier, answer_verifier
    from apps.engine.sandbox import BackendProbe, Sandbox

    none_work = tuple(BackendProbe(name, False, "missing") for name in sandbox_module.BACKENDS)
    monkeypatch.setattr("apps.engine.sandbox.properties.probe_backends", lambda: none_work)
    verifier = answer_verifier(Verifier(Sandbox(mode="required")), workspace)
    engine, _, _ = engine_for(["Fixed."], workspace, verifier=verifier)
    events = await collect(engine, TASK)
    assert events[-1].data["error"]["error_code"] == "sandbox_unavailable"


# ── AE2: simple modes never verify or reflect ─────────────────────────────────────────────────
async def test_direct_chat_never_verifies_or_reflects(workspace):
    verifier = Outcomes(FAIL)
    engine, _, hooks = engine_for(["Hello."], workspace, verifier=verifier)
    events = await collect(engine, AgentTask(task_id=3, goal="hi", mode="direct_chat"))
    assert types(events) == ["task_started", "token", "final_answer", "task_finished"]
    assert verifier.answers == [] and "phases" not in events[-1].data
    assert hooks.names == ["on_task_complete"]


async def test_react_with_verification_on_fails_without_reflecting(workspace):
    verifier = Outcomes(FAIL)
    cfg = {"verification": {"modes": {"react": True}}}
    engine, _, _ = engine_for(
        ["Fixed.", {"text": "Fixed!", "match": "failed"}], workspace, verifier=verifier, **cfg
    )
    events = await collect(engine, AgentTask(task_id=4, goal="fix it"))
    assert not of_type(events, "reflection") and not of_type(events, "phase_changed")
    assert events[-1].data["status"] == "failed"
    assert events[-1].data["error"]["error_code"] == "verification_failed"


def test_gate_call_lets_unknown_tools_through_to_the_ordinary_error():
    from apps.engine.plan.gate import gate_call
    from apps.engine.plan.phases import PhaseTracker, default_policy

    tracker = PhaseTracker.start(default_policy())
    assert gate_call(tracker, ToolCall("c1", "nope", {}), known={"read_file"}) == (None, ())


async def test_non_python_workspace_verifies_with_its_declared_commands_in_the_sandbox(tmp_path):
    """R3: no Python project → the workspace's/skill's commands, in the real sandbox."""
    from apps.engine.plan.verify.run import Verifier, answer_verifier
    from apps.engine.sandbox import Sandbox

    root = tmp_path / "notes"
    root.mkdir()
    (root / "README.md").write_text("draft\n")
    verifier = answer_verifier(Verifier(Sandbox()), root, ["grep -q final README.md"])
    turns = [
        "Done.",
        {
            "text": "Marking it final.",
            "tool_calls": [
                {
                    "name": "str_replace_editor",
                    "arguments": {
                        "command": "str_replace",
                        "path": "README.md",
                        "old_str": "draft",
                        "new_str": "final",
                    },
                }
            ],
            "match": "^Verification of your final answer failed",
        },
        {"text": "README is final now.", "after_tool": "str_replace_editor"},
    ]
    engine, _, _ = engine_for(turns, root, verifier=verifier)
    events = await collect(engine, TASK)
    results = [e.data for e in of_type(events, "verification_result")]
    assert [(r["passed"], r["commands"]) for r in results] == [
        (False, ["grep -q final README.md"]),
        (True, ["grep -q final README.md"]),
    ]
    assert events[-1].data["status"] == "completed"
    assert ("verification", "building", "retry") not in changes(events)  # it was in planning
    assert ("planning", "building", "retry") in changes(events)
