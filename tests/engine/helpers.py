"""Shared pieces for engine tests: small real tools, a hook recorder, config with overrides, and
the scripted model (the real in-process provider behind the real gateway)."""

from __future__ import annotations

import asyncio
from typing import Any

from apps.engine.config import AgentkitConfig, parse_config
from apps.engine.events import Event
from apps.engine.ports import TaskHooks
from apps.engine.task import TaskResult
from apps.engine.tools import Tool, ToolResult


def config(**sections: Any) -> AgentkitConfig:
    """Default config with some sections overridden, e.g. config(streaming={"flush_interval_ms": 0})."""
    return parse_config(sections)


class HookRecorder(TaskHooks):
    def __init__(self) -> None:
        self.calls: list[tuple[str, TaskResult]] = []

    async def on_task_complete(self, result: TaskResult) -> None:
        self.calls.append(("on_task_complete", result))

    async def on_task_failed(self, result: TaskResult) -> None:
        self.calls.append(("on_task_failed", result))

    async def on_task_cancelled(self, result: TaskResult) -> None:
        self.calls.append(("on_task_cancelled", result))

    async def on_task_parked(self, result: TaskResult) -> None:
        self.calls.append(("on_task_parked", result))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


class EchoTool(Tool):
    name = "echo"
    description = "Echo the text back in capitals."
    input_schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "times": {"type": "integer", "minimum": 1},
        },
        "required": ["text"],
    }

    async def execute(self, text: str, times: int = 1) -> ToolResult:
        return ToolResult.success(" ".join([text.upper()] * times))


class FailingTool(Tool):
    name = "explode"
    description = "Raises inside the tool."
    input_schema = {"type": "object", "properties": {}}

    async def execute(self) -> ToolResult:
        raise OSError("disk on fire")


class SlowTool(Tool):
    """Sleeps; records whether it was started and whether it was cancelled."""

    name = "slow"
    description = "Wait for a while."
    input_schema = {"type": "object", "properties": {"seconds": {"type": "number"}}}

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def execute(self, seconds: float = 30.0) -> ToolResult:
        self.started.set()
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return ToolResult.success(f"slept {seconds}")


class JobTool(Tool):
    """A long process the model polls: each status call shows more progress."""

    name = "job_status"
    description = "Show the progress of the background job."
    input_schema = {"type": "object", "properties": {"job": {"type": "string"}}}

    def __init__(self, finished_after: int = 5) -> None:
        self.polls = 0
        self.finished_after = finished_after

    async def execute(self, job: str = "build") -> ToolResult:
        self.polls += 1
        if self.polls >= self.finished_after:
            return ToolResult.success(f"{job}: done")
        return ToolResult.success(f"{job}: running, {self.polls * 20}% done")


def types(events: list[Event]) -> list[str]:
    return [event.type for event in events]


def of_type(events: list[Event], kind: str) -> list[Event]:
    return [event for event in events if event.type == kind]


class DivideTool(Tool):
    """Fails inside the tool on a zero divisor, so a corrected call can succeed."""

    name = "divide"
    description = "Divide a by b."
    input_schema = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }

    async def execute(self, a: float, b: float) -> ToolResult:
        return ToolResult.success(f"{a / b:g}")


class ThinkTool(Tool):
    name = "think"
    description = "Write down your reasoning."
    input_schema = {"type": "object", "properties": {"thought": {"type": "string"}}}

    async def execute(self, thought: str = "") -> ToolResult:
        return ToolResult.success("Noted.")


async def no_sleep(seconds: float) -> None:
    return None


def scripted_engine(turns, *, tools=(), cfg=None, chunk_delay=0.0, **engine_kwargs):
    """A ReActEngine on the real gateway playing `turns` in process; returns (engine, provider)
    where provider.requests records every request the model received."""
    from apps.engine.llm.gateway import Gateway
    from apps.engine.loop.react import ReActEngine
    from apps.engine.tools import ToolSet

    cfg = cfg or config()
    gateway = Gateway.for_script(turns, config=cfg, chunk_delay=chunk_delay, sleep=no_sleep)
    engine = ReActEngine(gateway, ToolSet(tools), cfg, **engine_kwargs)
    return engine, gateway.provider(cfg.llm.main)


async def collect(engine, task, **kwargs) -> list[Event]:
    return [event async for event in engine.run(task, **kwargs)]
