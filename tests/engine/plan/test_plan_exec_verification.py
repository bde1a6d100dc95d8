"""plan_exec verification and reflexion in the real engine with the scripted model (seed 000 U3,
U5, R10): verification on by default, reflexion as retry, gave_up_after_reflections, keep working
until done, sandbox_unavailable; and (AE2) the simple modes never verify or reflect."""

from __future__ import annotations

import json

import pytest

from apps.engine.sandbox import INSTALL_HINT, SandboxUnavailable
from apps.engine.task import AgentTask, TaskResult
from tests.engine.helpers import collect, config, of_type, types
from tests.engine.plan.plan_exec_support import FAIL, PASS, TASK, Outcomes, changes, engine_for


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
