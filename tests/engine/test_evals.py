"""The HumanEval workspaces and the reference policies in process: the real engine, the builtin
tools, the real verifier in the sandbox, and every request the model received."""

from __future__ import annotations

import json

from apps.engine.evals.humaneval import STUB_BODY, problems
from apps.engine.evals.policies import PolicyProvider, decide, subtly_wrong
from apps.engine.llm.gateway import Gateway
from apps.engine.llm.types import ChatRequest, Message, ToolCall, ToolSpec
from apps.engine.loop.react import ReActEngine
from apps.engine.plan.verify.run import Verifier, answer_verifier
from apps.engine.sandbox import Sandbox
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import available_tool_names, build_tools
from tests.engine.helpers import collect, config, no_sleep, of_type

PROBLEM = problems()["HumanEval/0"]


def workspace(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    for name, text in PROBLEM.workspace_files().items():
        (root / name).write_text(text)
    return root


def hidden_lines():
    return [
        line.strip()
        for line in PROBLEM.test.splitlines()
        if "assert" in line and line.strip() not in PROBLEM.prompt
    ]


async def test_wrong_first_in_plan_exec_is_corrected_by_the_failing_test_and_no_prompt_leaks(
    tmp_path,
):
    from apps.engine.plan.gate import active_command_filter

    root = workspace(tmp_path)
    cfg = config(streaming={"flush_interval_ms": 0})
    provider = PolicyProvider("wrong_first")
    gateway = Gateway(cfg, providers={cfg.llm.main: provider}, sleep=no_sleep)
    verifier = answer_verifier(Verifier(Sandbox(), cfg.verification), root)
    tools = build_tools(
        ToolContext(root=root, command_filter=active_command_filter), available_tool_names()
    )
    engine = ReActEngine(gateway, ToolSet(tools), cfg, verifier=verifier)
    events = await collect(engine, AgentTask(task_id=1, goal=PROBLEM.goal(), mode="plan_exec"))
    assert events[-1].data["status"] == "completed"
    results = [e.data["passed"] for e in of_type(events, "verification_result")]
    assert results == [False, True]
    assert (
        "FAILED test_examples.py::test_example_"
        in of_type(events, "verification_result")[0].data["errors"][0]
    )
    assert PROBLEM.canonical_solution in (root / "solution.py").read_text()
    # every prompt the model received: system blocks, tool specs, messages
    prompts = [
        json.dumps(
            {
                "system": [block.text for block in request.system],
                "tools": [tool.description for tool in request.tools],
                "messages": [message.content for message in request.messages],
            }
        )
        for request in provider.requests
    ]
    assert len(prompts) >= 6
    assert not any("def check(" in p or line in p for p in prompts for line in hidden_lines())


def _request(*messages: Message) -> ChatRequest:
    offered = tuple(
        ToolSpec(name, name, {"type": "object"}) for name in ("read_file", "str_replace_editor")
    )
    return ChatRequest(messages, (), offered)


def test_wrong_first_keys_on_any_failing_test_report_not_on_names():
    wrong = subtly_wrong(PROBLEM)
    read = ToolCall("c1", "read_file", {"path": "solution.py"})
    edit = ToolCall(
        "c2",
        "str_replace_editor",
        {"command": "str_replace", "path": "solution.py", "old_str": STUB_BODY, "new_str": wrong},
    )
    history = (
        Message("user", PROBLEM.goal()),
        Message("assistant", "", tool_calls=[read]),
        Message("tool", "the stub", tool_call_id="c1", name="read_file"),
        Message("assistant", "", tool_calls=[edit]),
        Message("tool", "edited", tool_call_id="c2", name="str_replace_editor"),
    )
    # no failing test shown: the wrong answer stands
    assert decide("wrong_first", _request(*history)).tool_calls == []
    assert (
        decide("wrong_first", _request(*history, Message("user", "Looks fine?"))).tool_calls == []
    )
    # any pytest failure report, whatever the test is called, gets the correction
    for report in (
        "FAILED tests/test_anything.py::test_whatever - assert 1 == 2",
        "=== 1 failed, 3 passed in 0.1s ===",
        "E   AssertionError: got True, expected False",
    ):
        (fix,) = decide("wrong_first", _request(*history, Message("user", report))).tool_calls
        assert fix.arguments["old_str"] == wrong
        assert fix.arguments["new_str"] == PROBLEM.canonical_solution


def test_the_wrong_body_differs_on_every_problem_and_stubs_hold_one_placeholder():
    for problem in problems().values():
        assert problem.stub().count(STUB_BODY) == 1
        assert subtly_wrong(problem) != problem.canonical_solution
        assert "def check(" not in problem.visible_tests()
