"""A prompt the server finds longer than its context window (HTTP 400 naming the context, as
llama.cpp words it): typed `context_overflow`, answered by compressing once and retrying."""

from __future__ import annotations

from apps.engine.llm.errors import ContextWindowError, status_error
from apps.engine.task import AgentTask
from tests.engine.helpers import EchoTool, collect, config, of_type, scripted_engine

LLAMA_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "request (3031 tokens) exceeds the available context size (2048 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 3031,
        "n_ctx": 2048,
    }
}


def test_llama_cpp_overflow_is_a_context_window_error():
    assert isinstance(status_error(400, LLAMA_OVERFLOW), ContextWindowError)


def echo(i: int) -> dict:
    return {"tool_calls": [{"name": "echo", "arguments": {"text": f"word {i} " * 200}}]}


CFG = dict(compression={"keep_first": 1, "keep_last": 2, "summary_max_tokens": 64})


async def test_an_overflow_is_compressed_once_and_the_step_retried():
    summary = {"text": "Echoed words 0 to 5."}  # the compressor's summary call
    turns = [echo(i) for i in range(6)] + [{"fail": "context_window"}, summary, {"text": "done"}]
    engine, _ = scripted_engine(turns, tools=[EchoTool()], cfg=config(**CFG))
    events = await collect(engine, AgentTask(1, "echo a lot", mode="react"))
    finished = events[-1]
    assert finished.data["status"] == "completed", finished.data
    (compressed,) = of_type(events, "compression")
    assert compressed.data["reason"] == "context_overflow"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_an_overflow_that_compression_cannot_fix_is_context_overflow():
    turns = [{"fail": "context_window"}, {"fail": "context_window"}, {"text": "never"}]
    engine, _ = scripted_engine(turns, cfg=config(**CFG))
    events = await collect(engine, AgentTask(1, "x " * 50, mode="react"))
    finished = events[-1]
    assert finished.data["status"] == "failed"
    assert finished.data["error"]["error_code"] == "context_overflow"
