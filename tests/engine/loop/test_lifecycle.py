"""Exactly one lifecycle hook fires, once, on every exit path, for run() and execute() alike
(seed 000 U2 / KTD-4); cancellation and the wall-time limit stop a run promptly."""

from __future__ import annotations

import asyncio
import time

import pytest

from apps.engine.loop.cancellation import CancellationToken
from apps.engine.ports import TaskHooks, VerificationOutcome
from apps.engine.task import AgentTask, TaskResult
from tests.engine.helpers import (
    EchoTool,
    HookRecorder,
    SlowTool,
    collect,
    config,
    of_type,
    scripted_engine,
)

TASK = AgentTask(task_id=1, goal="do it")
SLOW_TURNS = [
    {"text": "Waiting.", "tool_calls": [{"name": "slow", "arguments": {"seconds": 30}}]},
    "never reached",
]


async def drain_with_run(engine, task, **kwargs) -> TaskResult:
    events = await collect(engine, task, **kwargs)
    return TaskResult.from_event(events[-1])


async def drain_with_execute(engine, task, **kwargs) -> TaskResult:
    return await engine.execute(task, **kwargs)


DRAINS = pytest.mark.parametrize(
    "drain", [drain_with_run, drain_with_execute], ids=["run", "execute"]
)


async def raising_verifier(answer: str) -> VerificationOutcome:
    raise RuntimeError("verifier port is broken")


def exit_path(name: str):
    """(turns, tools, cfg, engine kwargs) for each way a run ends normally or by failure."""
    echo_forever = [{"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}], "repeat": True}]
    return {
        "success": (["Done."], [], config(), {}),
        "step_limit": (
            echo_forever,
            [EchoTool()],
            config(react={"max_steps": 2, "loop_detection": {"enabled": False}}),
            {},
        ),
        "model_failure": (
            [{"text": "half", "fail": "server_error"}],
            [],
            config(llm={"retries": {"max_attempts": 1}}),
            {},
        ),
        "loop_detected": (echo_forever, [EchoTool()], config(), {}),
    }[name]


@DRAINS
@pytest.mark.parametrize(
    ("path", "hook", "status"),
    [
        ("success", "on_task_complete", "completed"),
        ("step_limit", "on_task_failed", "failed"),
        ("model_failure", "on_task_failed", "failed"),
        ("loop_detected", "on_task_failed", "failed"),
    ],
)
async def test_one_hook_fires_once_with_the_result(drain, path, hook, status):
    turns, tools, cfg, kwargs = exit_path(path)
    hooks = HookRecorder()
    engine, _ = scripted_engine(turns, tools=tools, cfg=cfg, hooks=hooks, **kwargs)
    result = await drain(engine, TASK)
    assert result.status == status
    assert hooks.calls == [(hook, result)]


@DRAINS
async def test_engine_bug_ends_with_error_and_hook_then_propagates(drain):
    hooks = HookRecorder()
    engine, _ = scripted_engine(
        ["answer"],
        cfg=config(verification={"modes": {"react": True}}),
        hooks=hooks,
        verifier=raising_verifier,
    )
    with pytest.raises(RuntimeError, match="verifier port is broken"):
        await drain(engine, TASK)
    assert hooks.names == ["on_task_failed"]
    assert hooks.calls[0][1].error.error_code == "engine_error"


async def test_engine_bug_still_emits_error_and_task_finished_before_raising():
    engine, _ = scripted_engine(
        ["answer"], cfg=config(verification={"modes": {"react": True}}), verifier=raising_verifier
    )
    events = []
    with pytest.raises(RuntimeError):
        async for event in engine.run(TASK):
            events.append(event)
    assert [e.type for e in events[-2:]] == ["error", "task_finished"]
    assert events[-2].data["error_struct"]["error_code"] == "engine_error"
    assert events[-1].data["status"] == "failed"


@DRAINS
async def test_cancel_mid_tool_stops_promptly_and_ends_cancelled(drain):
    hooks = HookRecorder()
    slow = SlowTool()
    engine, model = scripted_engine(SLOW_TURNS, tools=[slow], hooks=hooks)
    token = CancellationToken()

    async def cancel_when_tool_runs():
        await slow.started.wait()
        token.cancel("user pressed stop")

    started = time.monotonic()
    canceller = asyncio.create_task(cancel_when_tool_runs())
    result = await drain(engine, TASK, cancel=token)
    await canceller
    assert time.monotonic() - started < 2
    assert slow.cancelled, "the tool's wait was cancelled, not left running"
    assert result.status == "cancelled" and result.error.message == "user pressed stop"
    assert len(model.requests) == 1
    assert hooks.calls == [("on_task_cancelled", result)]


async def test_cancel_mid_tool_reports_the_interrupted_call():
    slow = SlowTool()
    engine, _ = scripted_engine(SLOW_TURNS, tools=[slow])
    token = CancellationToken()
    events = []
    async for event in engine.run(TASK, cancel=token):
        events.append(event)
        if event.type == "tool_call":
            asyncio.get_running_loop().call_later(0.05, token.cancel)
    result = of_type(events, "tool_result")[0].data
    assert (result["ok"], result["error_code"]) == (False, "interrupted")
    assert events[-1].type == "task_finished" and events[-1].data["status"] == "cancelled"
    assert not of_type(events, "error"), "cancellation is not an error"


async def test_cancel_mid_stream_stops_the_model_call():
    hooks = HookRecorder()
    words = " ".join(f"w{i}" for i in range(400))
    engine, _ = scripted_engine([words], chunk_delay=0.01, hooks=hooks)
    token = CancellationToken()
    events = []
    started = time.monotonic()
    async for event in engine.run(TASK, cancel=token):
        events.append(event)
        if event.type == "token":
            token.cancel()
    assert time.monotonic() - started < 1  # the full stream would take 4 s
    assert events[-1].data["status"] == "cancelled"
    assert hooks.names == ["on_task_cancelled"]


async def test_token_cancelled_before_the_run_makes_no_model_call():
    engine, model = scripted_engine(["answer"])
    token = CancellationToken()
    token.cancel()
    result = await engine.execute(TASK, cancel=token)
    assert result.status == "cancelled" and model.requests == []


@DRAINS
async def test_wall_time_limit_interrupts_a_hanging_tool(drain):
    hooks = HookRecorder()
    slow = SlowTool()
    engine, _ = scripted_engine(
        SLOW_TURNS, tools=[slow], cfg=config(react={"max_wall_seconds": 0.2}), hooks=hooks
    )
    started = time.monotonic()
    result = await drain(engine, TASK)
    assert time.monotonic() - started < 2
    assert slow.cancelled
    assert result.status == "failed" and result.error.error_code == "wall_time_exceeded"
    assert hooks.calls == [("on_task_failed", result)]


async def test_consumer_closing_the_stream_early_fires_the_cancelled_hook_once():
    hooks = HookRecorder()
    engine, _ = scripted_engine(SLOW_TURNS, tools=[SlowTool()], hooks=hooks)
    events = engine.run(TASK)
    first = await anext(events)
    assert first.type == "task_started"
    await events.aclose()
    assert hooks.names == ["on_task_cancelled"]
    assert hooks.calls[0][1].error.error_code == "interrupted"


async def test_consumer_stopping_after_task_finished_gets_the_real_outcome_hook():
    hooks = HookRecorder()
    engine, _ = scripted_engine(["Done."], hooks=hooks)
    events = engine.run(TASK)
    async for event in events:
        if event.type == "task_finished":
            break
    await events.aclose()
    assert hooks.names == ["on_task_complete"]


@DRAINS
async def test_cancelling_the_asyncio_task_fires_the_cancelled_hook_and_propagates(drain):
    hooks = HookRecorder()
    slow = SlowTool()
    engine, _ = scripted_engine(SLOW_TURNS, tools=[slow], hooks=hooks)
    runner = asyncio.create_task(drain(engine, TASK))
    await slow.started.wait()
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert slow.cancelled
    assert hooks.names == ["on_task_cancelled"]


async def test_a_hook_that_raises_does_not_change_the_outcome(caplog):
    class Broken(TaskHooks):
        async def on_task_complete(self, result):
            raise ValueError("evolution is down")

    engine, _ = scripted_engine(["Done."], hooks=Broken())
    result = await engine.execute(TASK)
    assert result.status == "completed"
    assert "on_task_complete raised" in caplog.text


@pytest.mark.parametrize("kind", ["success", "step_limit", "model_failure", "loop_detected"])
async def test_run_and_execute_give_identical_results_and_hook_calls(kind):
    outcomes = []
    for drain in (drain_with_run, drain_with_execute):
        turns, tools, cfg, kwargs = exit_path(kind)
        hooks = HookRecorder()
        engine, model = scripted_engine(turns, tools=tools, cfg=cfg, hooks=hooks, **kwargs)
        result = await drain(engine, TASK)
        outcomes.append((result, hooks.calls, [r.messages for r in model.requests]))
    assert outcomes[0] == outcomes[1]
