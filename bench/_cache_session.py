"""Shared by bench/prompt_cache.py and bench/compression.py: a long tool-using session of the real
engine (real gateway, real builtin tools over a generated workspace, the shipped python_coder
skill) against the fake LLM server speaking the Anthropic protocol, whose prompt-cache accounting
(apps/engine/llm/cachesim.py) follows Anthropic's rules. Every model call's usage is recorded.
The task carries what the runner gives a real one: workspace notes, facts, and the repository
map of the generated workspace built with the shipped `repo_map` settings (apps/tasks/run/runner.py).

Pricing uses Anthropic's multipliers on the base input price: cache writes 1.25x, cache reads
0.1x; output 5x input (Sonnet-class list prices: $3 in, $15 out, $0.30 read, $3.75 write per
Mtok); the auxiliary model costs a third of that (Haiku-class: $1 / $5 / $0.10 / $1.25).
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from apps.engine.config import SandboxConfig, parse_config
from apps.engine.llm.gateway import Gateway
from apps.engine.loop.react import ReActEngine
from apps.engine.sandbox import Sandbox
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import available_tool_names, build_tools
from apps.tools.builtin.repo_map import build_repo_map
from tests.fakes.llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent
MAIN_PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
AUX_PRICE = {"input": 1.0, "output": 5.0, "cache_read": 0.1, "cache_write": 1.25}
SUMMARY_TEXT = (
    "## Goal\nReview every module of pkg/ and list the functions without tests.\n"
    "## Decisions\n- Read the modules in order; note untested functions as they appear.\n"
    "## Files changed\nnone\n## Tests and their state\nnot run yet\n"
    "## Open items\n- Continue with the next module; untested so far: "
    + ", ".join(f"helper_{i}" for i in range(0, 60, 3))
)


@dataclass
class Call:
    kind: str  # "step" (the agent's model call) or "summary" (the compressor's)
    model: str
    input_tokens: int
    cache_read: int
    cache_write: int
    output_tokens: int
    cost: float


class RecordingModel:
    """The gateway, recording the usage of each call (stream = agent step, complete = summary)."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.calls: list[Call] = []

    def _record(self, kind: str, response) -> None:
        u = response.usage
        self.calls.append(
            Call(
                kind,
                response.alias,
                u.input_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.output_tokens,
                response.cost,
            )
        )

    async def stream(self, request, *, model=None):
        async for delta in self.gateway.stream(request, model=model):
            if delta.response is not None:
                self._record("step", delta.response)
            yield delta

    async def complete(self, request, *, model=None):
        response = await self.gateway.complete(request, model=model)
        self._record("summary", response)
        return response


def make_workspace(root: Path, files: int) -> None:
    """A Python package of `files` modules of about 1.5 KB each, all different."""
    package = root / "pkg"
    package.mkdir(parents=True)
    for i in range(files):
        body = [f'"""Module {i}: helpers for the billing pipeline."""', ""]
        for j in range(4):
            body += [
                f"def helper_{i * 4 + j}(values, factor={j + 1}):",
                f'    """Scale the values of batch {i}.{j} and drop the negative ones."""',
                "    kept = [value * factor for value in values if value >= 0]",
                f"    return sorted(kept)[: {10 + j}]",
                "",
            ]
        (package / f"mod_{i:03d}.py").write_text("\n".join(body))


def script(turns: int) -> list[dict]:
    """The summarizer's answer (any time it is asked), then `turns - 1` reads, then the answer."""
    steps: list[dict] = [{"text": SUMMARY_TEXT, "match": "Transcript to summarize", "repeat": True}]
    for i in range(turns - 1):
        steps.append(
            {
                "text": f"Reading module {i} next.",
                "tool_calls": [{"name": "read_file", "arguments": {"path": f"pkg/mod_{i:03d}.py"}}],
            }
        )
    steps.append("Done: every module read; the untested helpers are listed above.")
    return steps


def config(server: FakeLLMServer, *, cache: bool, compression: dict | None):
    shipped = yaml.safe_load((ROOT / "agentkit.yaml").read_text())
    return parse_config(
        {
            "models": {
                "main": server.model_entry("anthropic", model="main-model", price=MAIN_PRICE),
                "fast": server.model_entry("anthropic", model="fast-model", price=AUX_PRICE),
            },
            "llm": {"auxiliary_model": "fast", "retries": {"max_attempts": 1}},
            "skills": {"python_coder": shipped["skills"]["python_coder"]},
            "react": {"max_steps": 1000, "loop_detection": {"enabled": False}},
            "prompt_cache": {"enabled": cache},
            "repo_map": shipped.get("repo_map") or {},
            "compression": compression or {"enabled": False},
            "streaming": {"flush_interval_ms": 0},
        }
    )


async def run_session(turns: int, *, cache: bool = True, compression: dict | None = None):
    """One task of `turns` model steps; returns (calls, events)."""
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(script(turns)) as server:
        root = Path(tmp)
        make_workspace(root, turns)
        cfg = config(server, cache=cache, compression=compression)
        ctx = ToolContext(root=root, sandbox=Sandbox.from_config(SandboxConfig(mode="off")))
        tools = ToolSet(build_tools(ctx, available_tool_names()))
        skill = cfg.skills["python_coder"]
        task = AgentTask(
            task_id=1,
            goal="Review every module of pkg/ and list the functions that have no tests.",
            system_prompt=skill.system_prompt,
            tools=tuple(sorted(skill.tools)),
            notes="Run the tests with `pytest -q`. Modules live in pkg/; keep functions pure.",
            facts={"workspace": "bench"},
            repo_map=await repo_map(root, cfg),
        )
        async with Gateway(cfg) as gateway:
            model = RecordingModel(gateway)
            engine = ReActEngine(model, tools, cfg)
            events = [event async for event in engine.run(task)]
    if events[-1].data["status"] != "completed":
        raise RuntimeError(f"the benchmark session did not complete: {events[-1].data}")
    return model.calls, events


async def repo_map(root: Path, cfg) -> str:
    """The repository map, as the runner builds it for every tool-mode task (shipped settings)."""
    if not cfg.repo_map.enabled:
        return ""
    return await asyncio.to_thread(
        build_repo_map,
        root,
        max_tokens=cfg.repo_map.max_tokens,
        time_limit_seconds=cfg.repo_map.time_limit_seconds,
    )


def input_cost_units(call: Call) -> float:
    """Input cost in units of the base input price: uncached 1x, writes 1.25x, reads 0.1x."""
    uncached = call.input_tokens - call.cache_read - call.cache_write
    return uncached + 1.25 * call.cache_write + 0.1 * call.cache_read
