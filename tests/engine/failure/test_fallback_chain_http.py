"""Seed 001 U3: main run → Recovery → Emergency, driven through the fake LLM server's faults over
HTTP (500, 429 with retry-after, a hang past the read timeout, malformed SSE, an error event in a
200 stream, a cut stream). The chain itself is the real engine; nothing is mocked."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from apps.engine.config import parse_config
from apps.engine.failure.recovery import RECOVERY_REFLECT
from apps.engine.llm.gateway import Gateway
from apps.engine.loop.cancellation import CancellationToken
from apps.engine.loop.react import ReActEngine
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from tests.engine.helpers import EchoTool, HookRecorder, SlowTool, no_sleep, of_type, types
from tests.fakes.llm_server import FakeLLMServer, Fault

REFLECT_MATCH = RECOVERY_REFLECT.split(":")[0]  # "Your attempt at this task failed"
REFLECTION = "The call timed out; I will answer directly this time."
SCRIPT = [
    {"text": REFLECTION, "match": REFLECT_MATCH, "repeat": True},
    "The answer is 42.",
]
TASK = AgentTask(task_id=7, goal="What is the answer?")


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(SCRIPT) as running:
        yield running


@pytest.fixture
def llm(server):
    server.set_script(SCRIPT)
    server.reset()
    yield server
    server.reset()


def cfg_for(server, **fallback_chain):
    return parse_config(
        {
            "models": {"main": server.model_entry("openai")},
            "llm": {"retries": {"max_attempts": 1}, "timeout": {"read": 0.5}},
            "streaming": {"flush_interval_ms": 0},
            "fallback_chain": fallback_chain,
        }
    )


async def run_chain(server, *, task=TASK, tools=(), chain=True, cancel=None, **fallback_chain):
    cfg = cfg_for(server, **fallback_chain)
    hooks = HookRecorder()
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        engine = ReActEngine(
            gateway,
            ToolSet(list(tools)),
            cfg,
            hooks=hooks,
            fallback=cfg.fallback_chain if chain else None,
        )
        events = [event async for event in engine.run(task, cancel=cancel)]
    return events, hooks


def finished(events):
    assert events[-1].type == "task_finished"
    return events[-1].data


async def test_main_success_triggers_neither_recovery_nor_emergency(llm):
    events, hooks = await run_chain(llm)
    data = finished(events)
    assert data["status"] == "completed" and data["final"] == "The answer is 42."
    assert data["error"] is None and "salvage" not in data
    assert not {"recovery_started", "recovery_finished", "error"} & set(types(events))
    assert hooks.names == ["on_task_complete"]


async def test_timeout_then_recovery_succeeds_with_one_hook_and_visible_tiers(llm):
    llm.fail_next(Fault.hang(seconds=5))
    events, hooks = await run_chain(llm)
    data = finished(events)
    assert data["status"] == "completed" and data["final"] == "The answer is 42."
    assert data["error"] is None
    started = of_type(events, "recovery_started")[0].data
    assert started["attempt"] == 1 and started["max_retries"] == 1
    assert started["error_struct"]["error_code"] == "llm_timeout"
    assert started["reflection"] == {"ok": True, "text": REFLECTION}
    assert of_type(events, "recovery_finished")[0].data == {
        "attempt": 1,
        "ok": True,
        "status": "completed",
        "error_struct": None,
    }
    # the reflection reached the retried attempt; one seq stream, one hook
    assert REFLECTION in llm.requests[-1].body["messages"][-1]["content"]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert hooks.names == ["on_task_complete"]


async def test_timeout_recovery_fails_then_emergency_timeout_retryable(llm):
    llm.fail_next(Fault.hang(seconds=5), Fault.hang(seconds=5), Fault.hang(seconds=5))
    events, hooks = await run_chain(llm)
    data = finished(events)
    assert data["status"] == "failed"
    assert data["error"]["error_code"] == "timeout" and data["error"]["retryable"] is True
    assert data["error"]["suggestions"]
    assert of_type(events, "recovery_started")[0].data["reflection"]["ok"] is False
    recovered = of_type(events, "recovery_finished")[0].data
    assert recovered["ok"] is False and recovered["error_struct"]["error_code"] == "llm_timeout"
    fatal = of_type(events, "error")[-1].data
    assert fatal["fatal"] and fatal["error_struct"] == data["error"]
    assert hooks.names == ["on_task_failed"]
    result = hooks.calls[0][1]
    assert result.original_error.startswith("LLMTimeoutError")


@pytest.mark.parametrize(
    ("fault", "retryable", "message_part"),
    [
        (lambda: Fault.http_error(500), True, "unavailable"),
        (lambda: Fault.rate_limit(retry_after=0.01), True, "rate-limiting"),
        (lambda: Fault.malformed_sse(after_chunks=1), True, "unavailable"),
        (lambda: Fault.error_event(after_chunks=1), True, "unavailable"),
        (lambda: Fault.disconnect(after_chunks=2), True, "unavailable"),
        (lambda: Fault.http_error(401, "bad key"), False, "API key"),
        (lambda: Fault.http_error(400, "bad request"), False, "rejected"),
    ],
)
async def test_llm_faults_end_in_llm_failure_told_apart(llm, fault, retryable, message_part):
    llm.fail_next(*(fault() for _ in range(3)))  # main attempt, reflect call, retried attempt
    events, hooks = await run_chain(llm)
    error = finished(events)["error"]
    assert error["error_code"] == "llm_failure" and error["retryable"] is retryable
    assert message_part in error["message"]
    assert len(of_type(events, "recovery_started")) == 1
    assert hooks.names == ["on_task_failed"]


async def test_a_transient_500_is_recovered(llm):
    llm.fail_next(Fault.http_error(500))
    events, _ = await run_chain(llm)
    assert finished(events)["status"] == "completed"
    assert of_type(events, "recovery_finished")[0].data["ok"] is True


async def test_loop_detected_recovery_then_emergency_loop_detected(llm):
    llm.set_script(
        [
            {"text": "Reflected.", "match": REFLECT_MATCH, "repeat": True},
            {
                "text": "",
                "tool_calls": [{"name": "echo", "arguments": {"text": "a"}}],
                "repeat": True,
            },
        ]
    )
    events, _ = await run_chain(llm, tools=[EchoTool()])
    error = finished(events)["error"]
    assert error["error_code"] == "loop_detected" and error["retryable"] is True
    assert of_type(events, "recovery_started")[0].data["error_struct"]["error_code"] == (
        "loop_detected"
    )


async def test_recovery_disabled_goes_straight_to_emergency(llm):
    llm.fail_next(Fault.http_error(500))
    events, _ = await run_chain(llm, recovery={"enabled": False})
    assert finished(events)["error"]["error_code"] == "llm_failure"
    assert "recovery_started" not in types(events)
    assert len(llm.requests) == 1


async def test_emergency_disabled_keeps_the_original_error(llm):
    llm.fail_next(Fault.http_error(500), Fault.http_error(500), Fault.http_error(500))
    events, _ = await run_chain(llm, emergency={"enabled": False})
    error = finished(events)["error"]
    assert (
        error["error_code"] == "llm_status_error"
    )  # the run's own struct (fallback.py engine structs)
    assert "recovery_started" in types(events)


async def test_max_retries_bounds_recovery_and_recovery_never_recurses(llm):
    llm.fail_next(*(Fault.http_error(500) for _ in range(10)))
    events, hooks = await run_chain(llm, recovery={"max_retries": 2})
    assert [e.data["attempt"] for e in of_type(events, "recovery_started")] == [1, 2]
    assert len(llm.requests) == 5  # main + 2 × (reflect + attempt)
    assert hooks.names == ["on_task_failed"]
    llm.reset()
    llm.fail_next(Fault.http_error(500))
    events, _ = await run_chain(llm, recovery={"max_retries": 0})
    assert "recovery_started" not in types(events)


async def test_cancellation_propagates_without_recovery_or_emergency(llm):
    token = CancellationToken()

    async def cancel_soon():
        await asyncio.sleep(0.3)
        token.cancel("stop")

    llm.set_script(
        [
            {"text": "", "tool_calls": [{"name": "slow", "arguments": {"seconds": 30}}]},
            "done",
        ]
    )
    canceller = asyncio.create_task(cancel_soon())
    events, hooks = await run_chain(llm, tools=[SlowTool()], cancel=token)
    await canceller
    assert finished(events)["status"] == "cancelled"
    assert finished(events)["error"]["error_code"] == "cancelled"
    assert "recovery_started" not in types(events)
    assert hooks.names == ["on_task_cancelled"]


async def test_generic_exception_ends_as_internal_error_not_retryable(llm):
    async def verifier(answer):
        raise RuntimeError("verifier crashed at /work/secret")

    cfg = cfg_for(llm)
    modes = cfg.verification.modes.model_copy(update={"react": True})
    cfg = cfg.model_copy(
        update={"verification": cfg.verification.model_copy(update={"modes": modes})}
    )
    hooks = HookRecorder()
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        engine = ReActEngine(
            gateway, ToolSet([]), cfg, hooks=hooks, verifier=verifier, fallback=cfg.fallback_chain
        )
        events = []
        with pytest.raises(RuntimeError, match="verifier crashed"):
            async for event in engine.run(TASK):
                events.append(event)
    error = finished(events)["error"]
    assert error["error_code"] == "internal_error" and error["retryable"] is False
    assert "/work/secret" not in str(finished(events))  # the text stays in original_error
    assert "recovery_started" not in types(events)  # a bug is not reflected on
    assert hooks.calls[0][1].original_error == "RuntimeError: verifier crashed at /work/secret"


async def test_plan_exec_runs_are_not_re_reflected(llm):
    llm.fail_next(Fault.http_error(500))
    task = AgentTask(task_id=8, goal="Plan it.", mode="plan_exec")
    events, _ = await run_chain(llm, task=task)
    assert finished(events)["status"] == "failed"
    assert finished(events)["error"]["error_code"] == "llm_status_error"
    assert "recovery_started" not in types(events)


async def test_without_a_chain_the_engine_behaves_as_before(llm):
    llm.fail_next(Fault.http_error(500))
    events, _ = await run_chain(llm, chain=False)
    assert finished(events)["error"]["error_code"] == "llm_status_error"
    assert "recovery_started" not in types(events)


async def test_emergency_outside_git_salvages_the_editor_diffs(llm, tmp_path: Path):
    from apps.engine.config import SandboxConfig
    from apps.engine.sandbox import Sandbox
    from apps.tools.builtin.context import ToolContext
    from apps.tools.builtin.registry import build_tools

    (tmp_path / "app.py").write_text("x = 1\n")
    ctx = ToolContext(root=tmp_path, sandbox=Sandbox.from_config(SandboxConfig(mode="off")))
    editor = build_tools(ctx, ["str_replace_editor"])
    llm.set_script(
        [
            {
                "text": "",
                "tool_calls": [
                    {
                        "name": "str_replace_editor",
                        "arguments": {
                            "command": "str_replace",
                            "path": "app.py",
                            "old_str": "x = 1",
                            "new_str": "x = 2",
                        },
                    }
                ],
            },
        ]
    )
    events, _ = await run_chain(llm, tools=editor, recovery={"enabled": False})
    data = finished(events)
    assert data["status"] == "failed"
    salvage = data["salvage"]
    assert salvage["source"] == "editor" and salvage["files"] == ["app.py"]
    assert "-x = 1" in salvage["diff"] and "+x = 2" in salvage["diff"]


async def test_wall_time_out_mid_tool_recovers_with_a_fresh_time_budget(llm):
    # The first attempt's tool call is cut by the wall-time limit; Recovery closes the call
    # with an "interrupted" result (the fake server, like real ones, refuses a dangling call).
    llm.set_script(
        [
            {"text": REFLECTION, "match": REFLECT_MATCH},
            {"text": "", "tool_calls": [{"name": "slow", "arguments": {"seconds": 30}}]},
            "The answer is 42.",
        ]
    )
    cfg = cfg_for(llm)
    cfg = cfg.model_copy(update={"react": cfg.react.model_copy(update={"max_wall_seconds": 1.0})})
    hooks = HookRecorder()
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        engine = ReActEngine(
            gateway, ToolSet([SlowTool()]), cfg, hooks=hooks, fallback=cfg.fallback_chain
        )
        events = [event async for event in engine.run(TASK)]
    assert finished(events)["status"] == "completed"
    started = of_type(events, "recovery_started")[0].data
    assert started["error_struct"]["error_code"] == "wall_time_exceeded"
    assert started["reflection"]["ok"] is True
    closed = [m for m in llm.requests[-1].body["messages"] if m["role"] == "tool"]
    assert "interrupted" in closed[-1]["content"]
    assert hooks.names == ["on_task_complete"]


async def test_wall_time_out_twice_ends_in_emergency_timeout(llm):
    llm.set_script(
        [
            {"text": "Reflected.", "match": REFLECT_MATCH, "repeat": True},
            {
                "text": "",
                "tool_calls": [{"name": "slow", "arguments": {"seconds": 30}}],
                "repeat": True,
            },
        ]
    )
    cfg = cfg_for(llm)
    cfg = cfg.model_copy(update={"react": cfg.react.model_copy(update={"max_wall_seconds": 0.5})})
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        engine = ReActEngine(gateway, ToolSet([SlowTool()]), cfg, fallback=cfg.fallback_chain)
        events = [event async for event in engine.run(TASK)]
    error = finished(events)["error"]
    assert error["error_code"] == "timeout" and error["retryable"] is True
