"""What weak and local models do, through the fake LLM server (an OpenAI-compatible endpoint):
tool calls written as text, `tool_choice: required` with the final answer as a tool, one nudge
for a prose reply while the work is undone, a low default temperature for agent steps."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from apps.engine.config import parse_config
from apps.engine.llm.gateway import Gateway
from apps.engine.loop.react import ReActEngine
from apps.engine.loop.textcalls import text_call
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from tests.engine.helpers import EchoTool, collect, of_type
from tests.fakes.llm_server import FakeLLMServer

CALL = {"name": "echo", "arguments": {"text": "hi"}}


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def engine_on(server: FakeLLMServer, **model) -> ReActEngine:
    entry = {"provider": "openai", "model": "small", "base_url": server.openai_base_url, **model}
    cfg = parse_config(
        {
            "models": {"main": entry},
            "llm": {"retries": {"max_attempts": 1}},
            "streaming": {"flush_interval_ms": 0},
        }
    )
    return ReActEngine(Gateway(cfg), ToolSet([EchoTool()]), cfg)


@pytest.mark.parametrize(
    "written",
    [
        json.dumps(CALL),
        f"```json\n{json.dumps(CALL)}\n```",
        f"<tool_call>\n{json.dumps(CALL)}\n</tool_call>",
        json.dumps({"function": {"name": "echo", "arguments": json.dumps({"text": "hi"})}}),
    ],
    ids=["bare", "fenced", "tagged", "wrapped"],
)
async def test_a_call_written_as_text_runs_as_a_tool_call(server, written):
    server.set_script([{"text": written}, {"text": "It said HI."}])
    events = await collect(engine_on(server), AgentTask(1, "echo hi", mode="react"))
    (call,) = of_type(events, "tool_call")
    assert call.data["name"] == "echo" and call.data["arguments"] == {"text": "hi"}
    (result,) = of_type(events, "tool_result")
    assert "HI" in result.data["output"]
    assert any(e.type == "token" and e.data.get("restart") for e in events)
    assert events[-1].data["status"] == "completed"
    assert events[-1].data["final"] == "It said HI."
    sent = server.requests[-1].body["messages"]
    assert sent[2]["tool_calls"][0]["function"]["name"] == "echo"  # sent back as a call


@pytest.mark.parametrize(
    "written",
    [
        json.dumps({"name": "echo", "arguments": {"text": 5}}),  # invalid arguments
        json.dumps({"name": "unknown", "arguments": {}}),  # not an offered tool
        "Here it is: " + json.dumps(CALL),  # not the whole reply
        json.dumps({"name": "echo", "arguments": {"text": "hi"}, "why": "x"}),  # more than a call
    ],
    ids=["invalid-arguments", "unknown-tool", "prose-around", "extra-keys"],
)
def test_anything_else_stays_text(written):
    assert text_call(written, ToolSet([EchoTool()]).specs()) is None


async def test_required_makes_every_step_a_call_and_the_answer_a_tool(server):
    server.set_script(
        [
            {"tool_calls": [CALL]},
            {"tool_calls": [{"name": "final_answer", "arguments": {"text": "Echoed HI."}}]},
        ]
    )
    events = await collect(
        engine_on(server, tool_choice="required"), AgentTask(1, "echo hi", mode="react")
    )
    assert events[-1].data["status"] == "completed"
    assert events[-1].data["final"] == "Echoed HI."
    for request in server.requests:
        assert request.body["tool_choice"] == "required"
        names = {tool["function"]["name"] for tool in request.body["tools"]}
        assert names == {"echo", "final_answer"}
    assert [e.data["name"] for e in of_type(events, "tool_call")] == ["echo"]


async def test_prose_with_the_work_undone_gets_one_nudge(server):
    server.set_script(
        [
            {"text": "To fix it you would change the code."},
            {"tool_calls": [CALL]},
            {"text": "Fixed."},
        ]
    )
    events = await collect(engine_on(server), AgentTask(1, "fix the echo", mode="react"))
    assert events[-1].data["status"] == "completed" and events[-1].data["final"] == "Fixed."
    nudge = server.requests[1].body["messages"][-1]
    assert nudge["role"] == "user" and "echo" in nudge["content"] and "tool" in nudge["content"]


async def test_the_nudge_is_given_once_then_prose_is_accepted(server):
    server.set_script([{"text": "I cannot fix it."}, {"text": "I still cannot."}])
    events = await collect(engine_on(server), AgentTask(1, "fix the echo", mode="react"))
    assert events[-1].data["status"] == "completed"
    assert events[-1].data["final"] == "I still cannot."
    assert len(server.requests) == 2


async def test_a_question_answered_in_prose_is_not_nudged(server):
    server.set_script([{"text": "Paris."}])
    events = await collect(engine_on(server), AgentTask(1, "Capital of France?", mode="react"))
    assert events[-1].data["final"] == "Paris." and len(server.requests) == 1


@pytest.mark.parametrize(
    ("model", "mode", "expected"),
    [
        ({}, "react", 0.2),
        ({"temperature": 0.7}, "react", 0.7),
        ({}, "direct_chat", None),
        ({"model": "o3-mini"}, "react", None),
    ],
    ids=["agent-step-low", "alias-overrides", "chat-untouched", "reasoning-model"],
)
async def test_agent_steps_default_to_a_low_temperature(server, model, mode, expected):
    server.set_script([{"text": "Paris.", "repeat": True}])
    await collect(engine_on(server, **model), AgentTask(1, "Capital of France?", mode=mode))
    assert server.requests[0].body.get("temperature") == expected


async def test_required_on_a_server_that_ignores_tools_asks_again_for_a_json_call(server):
    # the server answers prose although tools were offered and a call required; asked again
    # for one JSON call by json_schema (grammar on llama.cpp), it writes one
    server.set_script(
        [
            {"text": "Let me think about echoing."},
            {"text": json.dumps(CALL)},
            {"text": json.dumps({"name": "final_answer", "arguments": {"text": "HI it is."}})},
        ]
    )
    events = await collect(
        engine_on(server, tool_choice="required"), AgentTask(1, "echo hi", mode="react")
    )
    assert [e.data["name"] for e in of_type(events, "tool_call")] == ["echo"]
    assert events[-1].data["final"] == "HI it is."
    again = server.requests[1].body
    assert again["response_format"]["type"] == "json_schema" and "tools" not in again
    names = [
        v["properties"]["name"]["const"]
        for v in again["response_format"]["json_schema"]["schema"]["anyOf"]
    ]
    assert sorted(names) == ["echo", "final_answer"]
