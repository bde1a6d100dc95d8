"""Runaway replies cut (loop/runaway.py): the repetition guard on streamed text and the per-step
wall limit stop the stream, tell the model, and end the run at the second cut."""

from __future__ import annotations

from apps.engine.loop.runaway import repetition
from apps.engine.task import AgentTask
from tests.engine.helpers import EchoTool, collect, config, of_type, scripted_engine

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
