"""plan_exec over HTTP with the fake LLM server (both wire protocols): the shipped demo scripts
drive the real engine, the real builtin tools on a copy of the demo workspace, and the real
verifier (pytest + ruff in the sandbox). AE1: fail → reflect → retry → pass; and the variant
that never passes ends gave_up_after_reflections."""

from __future__ import annotations

import json
import shutil

import pytest

from apps.engine.config import parse_config
from apps.engine.llm.gateway import Gateway
from apps.engine.llm.providers.script import DEMO_SCRIPT, SCRIPTS_DIR
from apps.engine.loop.react import ReActEngine
from apps.engine.plan.gate import active_command_filter
from apps.engine.plan.verify.run import Verifier, answer_verifier
from apps.engine.sandbox import Sandbox
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import available_tool_names, build_tools
from tests.engine.helpers import HookRecorder, no_sleep, of_type
from tests.fakes.llm_server import FakeLLMServer
from tests.support import ROOT

GOAL = "fix the failing test in tests/test_slug.py"


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "demo"
    shutil.copytree(ROOT / "demo" / "workspace", root)
    return root


async def run_plan(script, provider, root):
    with FakeLLMServer(script) as server:
        cfg = parse_config(
            {
                "models": {"main": server.model_entry(provider)},
                "streaming": {"flush_interval_ms": 0},
                "llm": {"timeout": {"read": 10}},
            }
        )
        sandbox = Sandbox.from_config(cfg.sandbox)
        verifier = Verifier(sandbox, cfg.verification)
        ctx = ToolContext(
            root=root, sandbox=sandbox, command_filter=active_command_filter, verifier=verifier
        )
        tools = ToolSet(build_tools(ctx, available_tool_names()))
        hooks = HookRecorder()
        async with Gateway(cfg, sleep=no_sleep) as gateway:
            engine = ReActEngine(
                gateway, tools, cfg, verifier=answer_verifier(verifier, root), hooks=hooks
            )
            events = [
                e async for e in engine.run(AgentTask(task_id=9, goal=GOAL, mode="plan_exec"))
            ]
        return events, hooks, [request.body for request in server.requests]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_plan_over_http_fails_verification_reflects_and_passes(provider, workspace):
    events, hooks, bodies = await run_plan(DEMO_SCRIPT, provider, workspace)

    assert events[-1].data["status"] == "completed", events[-1].data
    assert 'r"[^a-zA-Z0-9]+"' in (workspace / "textkit" / "slug.py").read_text()
    verification = [
        (e.data["passed"], e.data["reinjected"]) for e in of_type(events, "verification_result")
    ]
    assert verification == [(False, True), (False, False), (True, False)]
    assert len(of_type(events, "reflection")) == 1
    # the reflect call went over the wire without tools, with the verification log as evidence
    reflect = next(
        b for b in bodies if "Reflect before trying again" in json.dumps(b["messages"][-1])
    )
    assert not reflect.get("tools")
    assert "test_runs_of_separators_collapse" in json.dumps(reflect["messages"][-1])
    # every other call offers the same sorted tools, advance_phase among them
    offered = {
        tuple(sorted(t.get("name") or t["function"]["name"] for t in b["tools"]))
        for b in bodies
        if b.get("tools")
    }
    assert len(offered) == 1 and "advance_phase" in next(iter(offered))
    assert hooks.names == ["on_task_complete"]


async def test_plan_over_http_that_never_passes_gives_up_after_reflections(workspace):
    events, hooks, _ = await run_plan(SCRIPTS_DIR / "plan_exec_gives_up.yaml", "openai", workspace)
    finished = events[-1].data
    assert finished["status"] == "gave_up_after_reflections"
    assert len(of_type(events, "reflection")) == 1
    assert [e.data["budget"] for e in of_type(events, "budget_exhausted")] == ["reflect"]
    assert "hello-world!" in finished["verification"][-1]["log"]
    assert hooks.names == ["on_task_failed"]


async def test_phase_violation_reaches_the_model_over_http_as_a_tool_message(workspace):
    script = [
        {
            "text": "Editing straight away.",
            "tool_calls": [
                {
                    "name": "str_replace_editor",
                    "arguments": {"command": "view", "path": "textkit/slug.py"},
                }
            ],
        },
        {"text": "I will plan first, then.", "after_tool": "str_replace_editor"},
    ]
    events, _, bodies = await run_plan(script, "openai", workspace)
    violation = of_type(events, "phase_violation")[0].data
    assert violation["phase"] == "planning" and violation["tool"] == "str_replace_editor"
    message = bodies[1]["messages"][-1]
    assert message["role"] == "tool"
    payload = json.loads(message["content"].removeprefix("ERROR [phase_violation]: "))
    assert payload["error"] == "phase_violation" and "advance_phase" in payload["allowed_tools"]
