"""One side of bench/step_side_by_side: agentkit's marginal tool-call step, measured the way the
outside side-by-side measures every framework (its own process, pinned to one core, wall clock,
a zero-latency model made in the harness, a no-op tool, the fewest-step tasks' time subtracted).

    python -m bench._step_agentkit CORE   # prints {"short_s", "long_s", "marginal_us"} as one JSON line
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from apps.engine.config import parse_config
from apps.engine.llm.types import ChatResponse, StreamDelta, ToolCall, Usage
from apps.engine.loop.react import ReActEngine
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from bench._engine_task import NoopTool

SHORT, LONG, RUNS, WARMUP = 10, 30, 25, 5


class InstantModel:
    """Calls the tool `steps` times, then answers; each answer is one stream delta."""

    def __init__(self, steps: int) -> None:
        self.steps, self.calls = steps, 0

    async def stream(self, request, *, model=None):
        self.calls += 1
        if self.calls > self.steps:
            yield StreamDelta(response=ChatResponse(content="done", usage=Usage(10, 1)))
            return
        call = ToolCall(f"call_{self.calls}", "noop", {})
        yield StreamDelta(response=ChatResponse(tool_calls=[call], usage=Usage(10, 1)))


CONFIG = parse_config({"react": {"max_steps": 10_000}})


async def task_seconds(steps: int) -> float:
    engine = ReActEngine(InstantModel(steps), ToolSet([NoopTool()]), CONFIG)
    started = time.perf_counter()
    async for event in engine.run(AgentTask(task_id=1, goal="go", max_steps=steps + 1)):
        last = event
    elapsed = time.perf_counter() - started
    if last.data["status"] != "completed":
        raise RuntimeError(f"the side-by-side task did not complete: {last.data}")
    return elapsed


async def fastest() -> tuple[float, float]:
    for _ in range(WARMUP):
        await task_seconds(SHORT)
    short = min([await task_seconds(SHORT) for _ in range(RUNS)])
    long = min([await task_seconds(LONG) for _ in range(RUNS)])
    return short, long


if __name__ == "__main__":
    os.sched_setaffinity(0, {int(sys.argv[1])})
    short, long = asyncio.run(fastest())
    print(
        json.dumps(
            {"short_s": short, "long_s": long, "marginal_us": (long - short) / (LONG - SHORT) * 1e6}
        )
    )
