"""Runaway replies cut (loop/runaway.py): the repetition guard on streamed text and the per-step
wall limit stop the stream, tell the model, and end the run at the second cut."""

from __future__ import annotations

import pytest

from apps.engine.llm import Gateway
from apps.engine.loop.react import ReActEngine
from apps.engine.loop.runaway import repetition
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from tests.engine.helpers import EchoTool, collect, config, of_type, scripted_engine
from tests.engine.llm.conftest import ask, config_for
from tests.fakes.llm_server import FakeLLMServer, Fault

RAMBLE = "The launch code was:\n\n```\n" + "#\n" * 40


def test_the_same_line_over_and_over_is_rambling():
    assert "'#'" in repetition(RAMBLE)


def test_a_stretch_repeated_is_rambling_and_ordinary_text_is_not():
    assert repetition("intro. " + "I will now read the file and then I will edit it. " * 5)
    prose = " ".join(
        f"Sentence number {i} says something new about step {i * 7}." for i in range(60)
    )
    assert repetition(prose) is None
    code = "\n".join(f"    value_{i} = compute({i})" for i in range(50)) + "\n"
    assert repetition(code) is None
    assert repetition("}\n}\n}\n") is None


async def test_a_rambling_reply_is_cut_and_the_model_told():
    turns = [{"text": RAMBLE}, {"text": "The code is 4321."}]
    engine, provider = scripted_engine(turns, tools=[EchoTool()], cfg=config())
    events = await collect(engine, AgentTask(1, "what is the code?", mode="react"))
    (warning,) = [e for e in of_type(events, "error") if not e.data["fatal"]]
    assert warning.data["error_struct"]["error_code"] == "runaway_output"
    shown = "".join(e.data["text"] for e in of_type(events, "token") if e.data["step"] == 1)
    assert len(shown) < len(RAMBLE)  # the stream was stopped before its end
    told = provider.requests[1].messages[-1]
    assert told.role == "user" and "repeating" in told.content
    assert events[-1].data["status"] == "completed"
    assert events[-1].data["final"] == "The code is 4321."


async def test_the_second_cut_ends_the_run():
    engine, _ = scripted_engine([{"text": RAMBLE, "repeat": True}], cfg=config())
    events = await collect(engine, AgentTask(1, "what is the code?", mode="react"))
    assert events[-1].data["status"] == "failed"
    assert events[-1].data["error"]["error_code"] == "runaway_output"
    assert events[-1].data["usage"]["output_tokens"] > 0


async def test_a_step_over_its_wall_limit_is_cut_with_its_speed():
    cfg = config(react={"step_wall_seconds": 0.05})
    turns = [{"text": "slow " * 40}, {"text": "Done."}]
    engine, _ = scripted_engine(turns, cfg=cfg, chunk_delay=0.01)
    events = await collect(engine, AgentTask(1, "say something", mode="react"))
    (warning,) = [e for e in of_type(events, "error") if not e.data["fatal"]]
    message = warning.data["error_struct"]["message"]
    assert "tokens/s" in message and "step_wall_seconds" in message
    assert events[-1].data["final"] == "Done."


async def test_with_the_failure_chain_it_is_still_runaway_output_not_a_bug():
    cfg = config()
    engine, _ = scripted_engine(
        [{"text": RAMBLE, "repeat": True}], cfg=cfg, fallback=cfg.fallback_chain
    )
    events = await collect(engine, AgentTask(1, "what is the code?", mode="react"))
    assert events[-1].data["status"] == "failed"
    assert events[-1].data["error"]["error_code"] == "runaway_output"


# ── tool calls as they stream (StreamDelta.call) ──────────────────────────────────────────────
LONG_CALL = {
    "tool_calls": [
        {"name": "echo", "arguments": {"text": " ".join(f"word{i}" for i in range(200))}}
    ],
    "repeat": True,
}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_tool_call_streams_as_call_deltas_before_the_reply(provider):
    with FakeLLMServer([LONG_CALL], tokens_per_second=2000) as server:
        async with Gateway(config_for(server, {"main": provider}, attempts=1)) as gateway:
            deltas = [d async for d in gateway.stream(ask("echo", tools=(EchoTool().spec(),)))]
    calls = [d.call for d in deltas if d.call]
    assert len(calls) > 3 and deltas[-1].response is not None
    assert not any(d.text for d in deltas)  # never shown as the reply's text
    streamed = "".join(calls)
    assert streamed.startswith("\necho ") and "word199" in streamed
    (call,) = deltas[-1].response.tool_calls
    assert streamed == f"\necho {call.raw_arguments}"


async def test_a_slow_tool_call_is_cut_by_the_step_wall_limit():
    """A model that writes its tool call slowly (a small model under tool_choice: required)
    is held to react.step_wall_seconds as one writing text is."""
    with FakeLLMServer([LONG_CALL], tokens_per_second=60, usage_block=False) as server:
        cfg = config_for(server, {"main": "openai"}, attempts=1)
        react = cfg.react.model_copy(update={"step_wall_seconds": 0.5})
        cfg = cfg.model_copy(update={"react": react})
        async with Gateway(cfg) as gateway:
            engine = ReActEngine(gateway, ToolSet([EchoTool()]), cfg)
            events = await collect(engine, AgentTask(1, "echo the words", mode="react"))
    assert not of_type(events, "tool_call")  # cut before the call was whole
    finished = events[-1].data
    assert finished["status"] == "failed"
    assert finished["error"]["error_code"] == "runaway_output"
    assert "step_wall_seconds" in finished["error"]["message"]
    assert finished["usage"]["output_tokens"] > 0 and finished["usage"]["estimated"]


async def test_a_stream_broken_after_text_still_counts_its_tokens():
    """A call whose stream breaks mid-answer (no retry left) ends the run failed, with the
    prompt sent and the text that arrived counted, estimated."""
    with FakeLLMServer([{"text": "slow " * 80, "repeat": True}], usage_block=False) as server:
        server.fail_next(Fault.disconnect(after_chunks=10))
        cfg = config_for(server, {"main": "openai"}, attempts=1)
        async with Gateway(cfg) as gateway:
            engine = ReActEngine(gateway, ToolSet([EchoTool()]), cfg)
            events = await collect(engine, AgentTask(1, "say something", mode="react"))
    finished = events[-1].data
    assert finished["status"] == "failed"
    usage = finished["usage"]
    assert usage["estimated"] and usage["input_tokens"] > 0
    assert 0 < usage["output_tokens"] < 80  # the pieces before the break, not the whole answer
