"""Engine overhead per tool-call step, and peak memory of a long task.

A task of N steps: each step the model (zero latency) says one short sentence and calls a no-op
tool; after N calls it answers. Engine overhead = wall time of the run minus the time spent
waiting on the model's stream, divided by the steps: the loop, events, delta batching, schema
validation, loop detection, conversation bookkeeping. Measured with the scripted provider in
process, and over HTTP against the fake LLM server running in its own process.

Peak memory: tracemalloc over one 200-step task in process (the scripted provider's own log of
requests is cleared after each call, so the figure is the engine's and the conversation's).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from apps.engine.config import parse_config
from apps.engine.llm.gateway import Gateway
from apps.engine.loop import ReActEngine
from apps.engine.task import AgentTask
from apps.engine.tools import Tool, ToolResult, ToolSet
from bench._harness import report, summarize

STEPS_PER_TASK = 50
TASKS_IN_PROCESS = 40
TASKS_OVER_HTTP = 8
MEMORY_STEPS = 200


def script(steps: int) -> list[dict]:
    return [
        {"text": "All steps done.", "match": f"^step {steps}$", "repeat": True},
        {"text": "Next step.", "tool_calls": [{"name": "noop", "arguments": {}}], "repeat": True},
    ]


class NoopTool(Tool):
    """Does nothing; its output counts the calls so that no two observations are the same."""

    name = "noop"
    description = "Does nothing."
    input_schema = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.calls = 0

    async def execute(self) -> ToolResult:
        self.calls += 1
        return ToolResult.success(f"step {self.calls}")


class TimedModel:
    """Wraps a model client and adds up the time spent waiting on its streams."""

    def __init__(self, inner, *, after_call=None) -> None:
        self.inner = inner
        self.after_call = after_call
        self.waited = 0.0

    async def stream(self, request, *, model=None):
        deltas = aiter(self.inner.stream(request, model=model))
        while True:
            started = time.perf_counter()
            try:
                delta = await anext(deltas)
            except StopAsyncIteration:
                self.waited += time.perf_counter() - started
                break
            self.waited += time.perf_counter() - started
            yield delta
        if self.after_call is not None:
            self.after_call()


async def run_task(gateway, cfg, steps: int, *, after_call=None) -> tuple[float, float, int]:
    """(wall seconds, seconds waiting on the model, events) for one task of `steps` tool calls."""
    model = TimedModel(gateway, after_call=after_call)
    engine = ReActEngine(model, ToolSet([NoopTool()]), cfg)
    started = time.perf_counter()
    events = 0
    async for event in engine.run(AgentTask(task_id=1, goal="go", max_steps=steps + 1)):
        events += 1
        last = event
    wall = time.perf_counter() - started
    if last.data["status"] != "completed" or last.data["steps"] != steps + 1:
        raise RuntimeError(f"benchmark task did not complete as scripted: {last.data}")
    return wall, model.waited, events


def config(models: dict | None = None, max_steps: int = 1000):
    return parse_config(
        {
            **({"models": models} if models else {}),
            "react": {"max_steps": max_steps},
            "llm": {"retries": {"max_attempts": 1}},
        }
    )


def per_step_us(samples: list[tuple[float, float, int]], steps: int) -> dict:
    overhead = [(wall - waited) / (steps + 1) * 1e6 for wall, waited, _ in samples]
    total = [wall / (steps + 1) * 1e6 for wall, _, _ in samples]
    return {
        "overhead_us": summarize(overhead),
        "wall_us": summarize(total),
        "events_per_task": statistics.median(events for _, _, events in samples),
    }


async def in_process() -> dict:
    cfg = config()
    gateway = Gateway.for_script(script(STEPS_PER_TASK), config=cfg)
    provider = gateway.provider(cfg.llm.main)
    samples = []
    for _ in range(TASKS_IN_PROCESS + 3):
        samples.append(await run_task(gateway, cfg, STEPS_PER_TASK))
        provider.reset()
    return per_step_us(samples[3:], STEPS_PER_TASK)  # the first runs warm up imports and caches


async def over_http(base_url: str) -> dict:
    cfg = config(models={"main": {"provider": "openai", "model": "fake", "base_url": base_url}})
    samples = []
    async with Gateway(cfg) as gateway:
        for _ in range(TASKS_OVER_HTTP + 1):
            samples.append(await run_task(gateway, cfg, STEPS_PER_TASK))
    return per_step_us(samples[1:], STEPS_PER_TASK)


async def peak_memory() -> dict:
    cfg = config()
    gateway = Gateway.for_script(script(MEMORY_STEPS), config=cfg)
    provider = gateway.provider(cfg.llm.main)
    tracemalloc.start()
    try:
        await run_task(gateway, cfg, MEMORY_STEPS, after_call=provider.requests.clear)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {
        "steps": MEMORY_STEPS,
        "peak_kib": round(peak / 1024, 1),
        "end_kib": round(current / 1024, 1),
    }


def main() -> dict:
    from tests.fakes.llm_server import running_in_subprocess

    figures = {"steps_per_task": STEPS_PER_TASK, "in_process": asyncio.run(in_process())}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "script.json"
        path.write_text(json.dumps(script(STEPS_PER_TASK)))  # JSON is YAML
        with running_in_subprocess(script=path) as url:
            figures["over_http"] = asyncio.run(over_http(f"{url}/v1"))
    figures["memory"] = asyncio.run(peak_memory())
    inproc, http, memory = figures["in_process"], figures["over_http"], figures["memory"]
    table = [
        ("in-process overhead / step (median)", f"{inproc['overhead_us']['median']:.1f} µs"),
        ("in-process overhead / step (p90)", f"{inproc['overhead_us']['p90']:.1f} µs"),
        ("in-process wall / step (median)", f"{inproc['wall_us']['median']:.1f} µs"),
        ("HTTP overhead / step (median)", f"{http['overhead_us']['median']:.1f} µs"),
        ("HTTP wall / step (median)", f"{http['wall_us']['median']:.1f} µs"),
        (f"peak memory, {memory['steps']}-step task", f"{memory['peak_kib']:.0f} KiB"),
    ]
    report("engine_overhead", figures, table=table)
    return figures


if __name__ == "__main__":
    main()
