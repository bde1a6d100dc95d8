"""Acceptance: one scripted multi-step task through the fake LLM server over HTTP, run with run()
and with execute(): identical results and identical hook calls — also when the model fails
mid-stream and when the task is cancelled mid-tool (seed 000 U2 parity test)."""

from __future__ import annotations

import asyncio
import json

import pytest

from apps.engine.config import parse_config
from apps.engine.llm.gateway import Gateway
from apps.engine.loop.cancellation import CancellationToken
from apps.engine.loop.react import ReActEngine
from apps.engine.task import AgentTask, TaskResult
from apps.engine.tools import Tool, ToolResult, ToolSet
from tests.engine.helpers import DivideTool, EchoTool, HookRecorder, SlowTool, no_sleep
from tests.fakes.llm_server import FakeLLMServer, Fault
from tests.support import free_port

PORT = free_port()

TASK = AgentTask(task_id=42, goal="Echo hello, then compute 6 / 2.", system_prompt="Be exact.")

SCRIPT = [
    {"text": "First the echo.", "tool_calls": [{"name": "echo", "arguments": {"text": "hello"}}]},
    {
        "text": "Now the division.",
        "tool_calls": [{"name": "divide", "arguments": {"a": 6, "b": 0}}],
        "after_tool": "echo",
    },
    {
        "text": "Oops, fixing the divisor.",
        "tool_calls": [{"name": "divide", "arguments": {"a": 6, "b": 2}}],
        "after_tool": "divide",
        "match": r"^ERROR \[tool_execution_error\]",
    },
    {"text": "HELLO, and 6 / 2 = 3.", "after_tool": "divide", "match": "^3$"},
]


class ArmFault(Tool):
    """Like echo, but arms a server fault for the model's next call (a fault mid-task)."""

    name = "echo"
    description = "Echo the text back in capitals."
    input_schema = EchoTool.input_schema

    def __init__(self, server: FakeLLMServer, fault: Fault):
        self.server, self.fault = server, fault

    async def execute(self, text: str, times: int = 1) -> ToolResult:
        self.server.fail_next(self.fault)
        return ToolResult.success(text.upper())


async def run_once(provider, drain, *, tools=None, attempts=1, cancel_on=None):
    """Run TASK once against a fresh fake server on the same port (so tool-call ids and error
    messages repeat exactly); returns (result, hook calls, request bodies). `tools(server)`
    builds the tools."""
    with FakeLLMServer(SCRIPT, port=PORT) as server:
        return await _run_against(server, provider, drain, tools, attempts, cancel_on)


async def _run_against(server, provider, drain, tools, attempts, cancel_on):
    cfg = parse_config(
        {
            "models": {"main": server.model_entry(provider)},
            "llm": {"retries": {"max_attempts": attempts}, "timeout": {"read": 5}},
            "streaming": {"flush_interval_ms": 0},
        }
    )
    hooks = HookRecorder()
    tools = tools(server) if tools else [EchoTool(), DivideTool()]
    token = CancellationToken()
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        engine = ReActEngine(gateway, ToolSet(tools), cfg, hooks=hooks)
        watcher = None
        if cancel_on is not None:
            watcher = asyncio.create_task(_cancel_when_started(cancel_on, token))
        if drain == "run":
            events = [event async for event in engine.run(TASK, cancel=token)]
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            result = TaskResult.from_event(events[-1])
        else:
            result = await engine.execute(TASK, cancel=token)
        if watcher is not None:
            await watcher
    return result, hooks.calls, [request.body for request in server.requests]


async def _cancel_when_started(tool: SlowTool, token: CancellationToken) -> None:
    await tool.started.wait()
    token.cancel("stopped from the chat page")


async def both(provider, **kwargs):
    by_run = await run_once(provider, "run", **kwargs)
    by_execute = await run_once(provider, "execute", **kwargs)
    return by_run, by_execute


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_multi_step_task_over_http_gives_identical_results_and_hooks(provider):
    by_run, by_execute = await both(provider)
    assert by_run == by_execute
    result, hooks, bodies = by_run
    assert result.status == "completed" and result.final == "HELLO, and 6 / 2 = 3."
    assert result.steps == 4 and result.usage.llm_calls == 4 and result.usage.input_tokens > 0
    assert hooks == [("on_task_complete", result)]
    assert len(bodies) == 4 and all(body["stream"] for body in bodies)


async def test_tool_error_reaches_the_model_over_http_as_a_tool_message():
    result, _, bodies = await run_once("openai", "execute")
    failed_call = bodies[2]["messages"][-2]["tool_calls"][0]
    assert json.loads(failed_call["function"]["arguments"]) == {"a": 6, "b": 0}
    error_message = bodies[2]["messages"][-1]
    assert error_message["role"] == "tool" and error_message["tool_call_id"] == failed_call["id"]
    assert error_message["content"].startswith("ERROR [tool_execution_error]: ZeroDivisionError")
    corrected_call = bodies[3]["messages"][-2]["tool_calls"][0]
    assert json.loads(corrected_call["function"]["arguments"]) == {"a": 6, "b": 2}
    assert bodies[3]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": corrected_call["id"],
        "content": "3",
    }
    assert result.status == "completed"


async def test_system_prompt_reaches_anthropic_with_a_cache_breakpoint_after_the_stable_block():
    _, _, bodies = await run_once("anthropic", "execute")
    system = bodies[0]["system"]
    assert system[0]["cache_control"] == {"type": "ephemeral"}
    assert "Be exact." in system[0]["text"] and "cache_control" not in system[1]
    assert all(body["system"] == system for body in bodies)
    assert [tool["name"] for tool in bodies[0]["tools"]] == ["divide", "echo"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("fault", "code"),
    [
        (Fault.error_event(after_chunks=1), "llm_status_error"),
        (Fault.disconnect(after_chunks=2), "llm_connection_error"),
    ],
)
async def test_model_failing_mid_stream_gives_identical_failed_results_and_hooks(
    provider, fault, code
):
    def tools(server):
        return [ArmFault(server, fault), DivideTool()]

    by_run = await run_once(provider, "run", tools=tools)
    by_execute = await run_once(provider, "execute", tools=tools)
    assert by_run == by_execute
    result, hooks, bodies = by_run
    assert result.status == "failed" and result.error.error_code == code
    assert result.steps == 2 and len(bodies) == 2
    assert hooks == [("on_task_failed", result)]


async def test_model_failing_mid_stream_then_retried_completes_identically():
    def tools(server):
        return [ArmFault(server, Fault.disconnect(after_chunks=2)), DivideTool()]

    by_run = await run_once("openai", "run", tools=tools, attempts=2)
    by_execute = await run_once("openai", "execute", tools=tools, attempts=2)
    assert by_run == by_execute
    result, hooks, bodies = by_run
    assert result.status == "completed" and len(bodies) == 5
    assert hooks == [("on_task_complete", result)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_cancel_mid_tool_over_http_gives_identical_cancelled_results_and_hooks(provider):
    outcomes = []
    for drain in ("run", "execute"):
        slow = SlowTool()
        tools = lambda server, slow=slow: [EchoTool(), hanging_divide(slow)]  # noqa: E731
        outcomes.append(await run_once(provider, drain, tools=tools, cancel_on=slow))
        assert slow.cancelled
    assert outcomes[0] == outcomes[1]
    result, hooks, bodies = outcomes[0]
    assert result.status == "cancelled" and result.error.message == "stopped from the chat page"
    assert result.steps == 2 and len(bodies) == 2
    assert hooks == [("on_task_cancelled", result)]


def hanging_divide(slow: SlowTool) -> Tool:
    """A `divide` tool (taking the script's arguments) that hangs like SlowTool."""

    class HangingDivide(Tool):
        name = "divide"
        description = "Divide a by b, very slowly."
        input_schema = DivideTool.input_schema

        async def execute(self, a: float, b: float) -> ToolResult:
            return await slow.execute(seconds=30)

    return HangingDivide()
