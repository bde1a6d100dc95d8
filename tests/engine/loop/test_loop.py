"""ReActEngine on the scripted model: the step, typed tool errors back to the model (AE3), limits,
usage totals, model failures, the request the model receives."""

from __future__ import annotations

import pytest

from apps.engine.llm.types import Message
from apps.engine.plan.reflexion import CUT_OFF_REPLY
from apps.engine.task import AgentTask, TaskResult
from tests.engine.helpers import (
    DivideTool,
    EchoTool,
    HookRecorder,
    collect,
    config,
    of_type,
    scripted_engine,
    types,
)

ECHO_TASK = [
    {"text": "I will echo it.", "tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]},
    "The tool said HI.",
]


async def test_react_task_calls_the_tool_and_finishes_with_the_answer():
    engine, model = scripted_engine(ECHO_TASK, tools=[EchoTool()])
    events = await collect(engine, AgentTask(task_id=7, goal="echo hi"))

    assert types(events)[0] == "task_started" and types(events)[-2:] == [
        "final_answer",
        "task_finished",
    ]
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    assert {event.task_id for event in events} == {7}
    call, result = of_type(events, "tool_call")[0], of_type(events, "tool_result")[0]
    assert call.data["arguments"] == {"text": "hi"} and call.data["step"] == 1
    assert result.data["ok"] is True and result.data["output"] == "HI"
    assert result.data["call_id"] == call.data["call_id"]
    finished = events[-1].data
    assert finished["status"] == "completed" and finished["final"] == "The tool said HI."
    assert finished["steps"] == 2 and finished["usage"]["llm_calls"] == 2
    # The model saw the tool's output as a tool message answering its call.
    seen = model.requests[1].messages[-1]
    assert (seen.role, seen.content, seen.tool_call_id) == ("tool", "HI", call.data["call_id"])


async def test_token_events_concatenate_to_each_reply():
    engine, _ = scripted_engine(
        ECHO_TASK, tools=[EchoTool()], cfg=config(streaming={"flush_interval_ms": 0})
    )
    events = await collect(engine, AgentTask(task_id=1, goal="echo hi"))
    by_step: dict[int, str] = {}
    for event in of_type(events, "token"):
        by_step[event.data["step"]] = by_step.get(event.data["step"], "") + event.data["text"]
    assert by_step == {1: "I will echo it.", 2: "The tool said HI."}


async def test_direct_chat_is_one_call_without_tools():
    engine, model = scripted_engine(["Hello! How can I help?"], tools=[EchoTool()])
    result = await engine.execute(AgentTask(task_id=1, goal="hi", mode="direct_chat"))
    assert result.status == "completed" and result.final == "Hello! How can I help?"
    assert result.steps == 1 and len(model.requests) == 1
    assert model.requests[0].tools == ()


async def test_request_has_stable_then_volatile_system_blocks_sorted_tools_and_history():
    engine, model = scripted_engine(["done"], tools=[EchoTool(), DivideTool()])
    history = (Message("user", "earlier question"), Message("assistant", "earlier answer"))
    task = AgentTask(
        task_id=1,
        goal="now this",
        history=history,
        system_prompt="You are the maths skill.",
        context={"pitfalls": "never divide by zero"},
    )
    await engine.execute(task)
    request = model.requests[0]
    stable, volatile = request.system
    assert stable.cache and "You are the maths skill." in stable.text
    assert "never divide by zero" in volatile.text and "never divide" not in stable.text
    assert [tool.name for tool in request.tools] == ["divide", "echo"]
    assert request.messages == (*history, Message("user", "now this"))


async def test_system_prompt_bytes_do_not_change_between_steps():
    engine, model = scripted_engine(ECHO_TASK, tools=[EchoTool()])
    await engine.execute(AgentTask(task_id=1, goal="echo hi", context="memory"))
    assert model.requests[0].system == model.requests[1].system
    assert model.requests[0].tools == model.requests[1].tools


async def test_task_tools_restrict_what_the_model_is_offered_and_may_call():
    turns = [
        {"tool_calls": [{"name": "divide", "arguments": {"a": 1, "b": 1}}]},
        {"text": "ok", "match": "unknown_tool"},
    ]
    engine, model = scripted_engine(turns, tools=[EchoTool(), DivideTool()])
    result = await engine.execute(AgentTask(task_id=1, goal="x", tools=("echo",)))
    assert [tool.name for tool in model.requests[0].tools] == ["echo"]
    assert "no tool named 'divide'" in model.requests[1].messages[-1].content
    assert result.status == "completed"


async def test_tools_a_task_names_but_the_installation_lacks_are_reported_not_fatal():
    engine, model = scripted_engine(["done"], tools=[EchoTool()])
    events = await collect(engine, AgentTask(task_id=1, goal="x", tools=("echo", "run_tests")))
    assert events[0].data["tools"] == ["echo"]
    assert events[0].data["unavailable_tools"] == ["run_tests"]
    assert [tool.name for tool in model.requests[0].tools] == ["echo"]
    assert events[-1].data["status"] == "completed"


# ── AE3: each typed tool error reaches the model, and its corrected call succeeds ──────────────
@pytest.mark.parametrize(
    ("bad_call", "code"),
    [
        ({"name": "divide", "arguments": {"a": "six", "b": 2}}, "tool_call_invalid"),
        ({"name": "divide", "arguments": {"a": 6}}, "schema_mismatch"),
        ({"name": "divide", "arguments": {"a": 6, "b": 2, "c": 1}}, "schema_mismatch"),
        ({"name": "devide", "arguments": {"a": 6, "b": 2}}, "unknown_tool"),
        ({"name": "divide", "arguments": {"a": 6, "b": 0}}, "tool_execution_error"),
    ],
)
async def test_typed_tool_error_reaches_the_model_and_the_corrected_call_succeeds(bad_call, code):
    turns = [
        {"text": "Dividing.", "tool_calls": [bad_call]},
        {
            "text": "Fixing my call.",
            "tool_calls": [{"name": "divide", "arguments": {"a": 6, "b": 2}}],
            "after_tool": bad_call["name"],
            "tool_error": True,
            "match": rf"^ERROR \[{code}\]",
        },
        {"text": "6 / 2 = 3", "after_tool": "divide", "tool_error": False, "match": "^3$"},
    ]
    engine, model = scripted_engine(turns, tools=[DivideTool()])
    events = await collect(engine, AgentTask(task_id=1, goal="6 / 2?"))

    seen = model.requests[1].messages[-1]
    assert seen.role == "tool" and seen.is_error
    assert seen.content.startswith(f"ERROR [{code}]:")
    results = of_type(events, "tool_result")
    assert [(r.data["ok"], r.data["error_code"]) for r in results] == [(False, code), (True, None)]
    assert model.requests[2].messages[-1].content == "3"
    assert events[-1].data["status"] == "completed" and events[-1].data["final"] == "6 / 2 = 3"


# ── limits ───────────────────────────────────────────────────────────────────────────────────
async def test_max_steps_stops_with_a_failed_status_and_error_event():
    turns = [{"tool_calls": [{"name": "echo", "arguments": {"text": "again"}}], "repeat": True}]
    hooks = HookRecorder()
    engine, model = scripted_engine(
        turns,
        tools=[EchoTool()],
        cfg=config(react={"max_steps": 2, "loop_detection": {"enabled": False}}),
        hooks=hooks,
    )
    events = await collect(engine, AgentTask(task_id=1, goal="loop"))
    assert len(model.requests) == 2
    error = of_type(events, "error")[-1].data
    assert error["fatal"] is True
    assert error["error_struct"]["error_code"] == "max_steps_exceeded"
    assert set(error["error_struct"]) == {"error_code", "message", "suggestions", "retryable"}
    assert events[-1].data["status"] == "failed"
    assert hooks.names == ["on_task_failed"]


async def test_task_max_steps_overrides_the_config():
    turns = [{"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}], "repeat": True}]
    engine, model = scripted_engine(turns, tools=[EchoTool()])
    result = await engine.execute(AgentTask(task_id=1, goal="x", max_steps=1))
    assert result.error.error_code == "max_steps_exceeded" and len(model.requests) == 1


# ── usage ────────────────────────────────────────────────────────────────────────────────────
async def test_usage_and_cost_are_totalled_over_every_call():
    cfg = config(
        models={
            "main": {
                "provider": "scripted",
                "price": {"input": 2.0, "output": 10.0, "cache_read": 0.5},
            }
        }
    )
    usage = {"input_tokens": 1000, "output_tokens": 100, "cache_read_tokens": 600}
    turns = [
        {"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}], "usage": usage},
        {"text": "done", "usage": usage},
    ]
    engine, _ = scripted_engine(turns, tools=[EchoTool()], cfg=cfg)
    events = await collect(engine, AgentTask(task_id=1, goal="x"))
    finished = events[-1].data
    assert finished["usage"] == {
        "input_tokens": 2000,
        "output_tokens": 200,
        "cache_read_tokens": 1200,
        "cache_write_tokens": 0,
        "llm_calls": 2,
    }
    # per call: 400 uncached * 2 + 600 cached * 0.5 + 100 out * 10 = 2100 per Mtok
    assert finished["cost"] == pytest.approx(2 * 2100 / 1_000_000)
    assert TaskResult.from_event(events[-1]).usage.cache_read_tokens == 1200


# ── the model misbehaving or failing ─────────────────────────────────────────────────────────
async def test_reply_cut_off_at_the_token_limit_is_not_taken_as_the_answer():
    turns = [
        {"text": "The answer is a long", "finish_reason": "length"},
        {"text": "Short answer: 42.", "match": "cut off"},
    ]
    engine, model = scripted_engine(turns)
    result = await engine.execute(AgentTask(task_id=1, goal="x"))
    assert model.requests[1].messages[-1] == Message("user", CUT_OFF_REPLY)
    assert result.final == "Short answer: 42."


async def test_model_failing_mid_stream_fails_the_task_and_keeps_the_text_that_arrived():
    turns = [{"text": "Partial thoughts before", "fail": "server_error"}]
    hooks = HookRecorder()
    engine, _ = scripted_engine(
        turns, cfg=config(llm={"retries": {"max_attempts": 1}}), hooks=hooks
    )
    events = await collect(engine, AgentTask(task_id=1, goal="x"))
    assert "".join(e.data["text"] for e in of_type(events, "token")) == "Partial thoughts before"
    struct = of_type(events, "error")[0].data["error_struct"]
    assert struct["error_code"] == "llm_status_error" and struct["retryable"] is True
    assert events[-1].data["status"] == "failed"
    assert hooks.names == ["on_task_failed"]


async def test_retried_call_tells_the_client_to_drop_the_text_of_the_failed_attempt():
    turns = [{"text": "Wrong start", "fail": "connection"}, "Right answer."]
    engine, _ = scripted_engine(turns, cfg=config(streaming={"flush_interval_ms": 0}))
    events = await collect(engine, AgentTask(task_id=1, goal="x"))
    tokens = of_type(events, "token")
    restart_at = next(i for i, e in enumerate(tokens) if e.data.get("restart"))
    assert "".join(e.data["text"] for e in tokens[:restart_at]) == "Wrong start"
    assert "".join(e.data["text"] for e in tokens[restart_at + 1 :]) == "Right answer."
    assert events[-1].data["final"] == "Right answer."


@pytest.mark.parametrize(
    ("fail", "code"),
    [
        ("auth", "llm_authentication_failed"),
        ("context_window", "context_overflow"),
        ("rate_limit", "llm_rate_limited"),
        ("timeout", "llm_timeout"),
    ],
)
async def test_llm_errors_end_the_task_with_a_specific_error_code(fail, code):
    engine, _ = scripted_engine([{"fail": fail}], cfg=config(llm={"retries": {"max_attempts": 1}}))
    result = await engine.execute(AgentTask(task_id=1, goal="x"))
    assert result.status == "failed" and result.error.error_code == code
    assert result.error.suggestions


async def test_script_running_out_is_a_failed_task_not_a_crash():
    engine, _ = scripted_engine(
        [{"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]}], tools=[EchoTool()]
    )
    result = await engine.execute(AgentTask(task_id=1, goal="x"))
    assert result.error.error_code == "llm_script_exhausted"


async def test_one_engine_runs_overlapping_tasks_independently():
    import asyncio

    turns = [
        {
            "text": "a",
            "match": "task A",
            "tool_calls": [{"name": "echo", "arguments": {"text": "a"}}],
        },
        {
            "text": "b",
            "match": "task B",
            "tool_calls": [{"name": "echo", "arguments": {"text": "b"}}],
        },
        {"text": "done A", "match": "^A$"},
        {"text": "done B", "match": "^B$"},
    ]
    engine, _ = scripted_engine(turns, tools=[EchoTool()], chunk_delay=0.001)
    first, second = await asyncio.gather(
        engine.execute(AgentTask(task_id="A", goal="task A")),
        engine.execute(AgentTask(task_id="B", goal="task B")),
    )
    assert (first.final, first.steps) == ("done A", 2)
    assert (second.final, second.steps) == ("done B", 2)


async def test_each_steps_first_tool_call_carries_the_usage_so_far():
    turns = [
        {"text": "One.", "tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]},
        {
            "text": "Two.",
            "tool_calls": [
                {"name": "echo", "arguments": {"text": "b"}},
                {"name": "echo", "arguments": {"text": "c"}},
            ],
        },
        "Done.",
    ]
    engine, _ = scripted_engine(turns, tools=[EchoTool()])
    events = await collect(engine, AgentTask(task_id=1, goal="echo three times"))

    calls = [e for e in events if e.type == "tool_call"]
    finished = events[-1].data
    assert [("usage" in c.data) for c in calls] == [True, True, False]
    first, second = calls[0].data["usage"], calls[1].data["usage"]
    assert first["llm_calls"] == 1 and second["llm_calls"] == 2
    assert 0 < first["input_tokens"] < second["input_tokens"] < finished["usage"]["input_tokens"]
    assert calls[1].data["cost"] <= finished["cost"]
