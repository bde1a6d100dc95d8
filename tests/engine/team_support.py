"""Shared by the team_collab tests: an orchestrator whose experts play a script on the real
gateway (one scripted provider for the whole team, so its `.requests` show every model call),
small real tools, and an in-memory CheckpointStore."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from apps.engine.config.team import DEFAULT_EXPERTS
from apps.engine.llm.gateway import Gateway
from apps.engine.loop.react import ReActEngine
from apps.engine.plan.spec import SpecDraft
from apps.engine.ports import PhaseCheckpoint
from apps.engine.sandbox import Sandbox
from apps.engine.task import AgentTask
from apps.engine.team.orchestrator import TeamOrchestrator
from apps.engine.team.rollback import RollbackExecutor
from apps.engine.tools import Tool, ToolResult, ToolSet
from tests.engine.helpers import config, no_sleep

TASK = AgentTask(task_id=7, goal="ship the feature", mode="plan_exec")


class MemoryCheckpoints:
    def __init__(self, saved: list[PhaseCheckpoint] | None = None):
        self.saved = list(saved or [])

    async def save(self, checkpoint: PhaseCheckpoint) -> None:
        self.saved.append(checkpoint)

    async def load(self) -> list[PhaseCheckpoint]:
        return list(self.saved)


class Probe(Tool):
    """Waits a little and records how many phases were inside it at once."""

    name = "probe"
    description = "Do a piece of the work."
    input_schema = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.inside = 0
        self.most = 0

    async def execute(self) -> ToolResult:
        self.inside += 1
        self.most = max(self.most, self.inside)
        await asyncio.sleep(0.2)
        self.inside -= 1
        return ToolResult.success("done")


class WriteFile(Tool):
    """Writes a file in the workspace (stands in for the editor)."""

    name = "write"
    description = "Write a file."
    input_schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path", "text"],
    }

    def __init__(self, root: Path) -> None:
        self.root = root

    async def execute(self, path: str, text: str) -> ToolResult:
        (self.root / path).write_text(text)
        return ToolResult.success(f"wrote {path}")


def spec(*phases: dict, **extra) -> SpecDraft:
    return SpecDraft.model_validate({"goal": "ship the feature", "phases": list(phases), **extra})


def phase(pid: str, role: str = "coder", depends_on=(), **extra) -> dict:
    return {
        "id": pid,
        "title": f"{pid} title",
        "role": role,
        "depends_on": list(depends_on),
        **extra,
    }


def answer(pid: str, text: str | None = None, **extra) -> dict:
    """A turn that answers phase `pid`'s first call with a final answer."""
    return {
        "match": f"Your phase, as the [a-z]+: {pid} ",
        "text": text or f"{pid} is done.",
        **extra,
    }


def team(
    turns,
    *,
    tools=(),
    root: Path | None = None,
    checkpoints=None,
    template=None,
    sandbox: Sandbox | None = None,
    timeout: float = 30.0,
    hooks=None,
    **sections,
):
    """(orchestrator, provider): experts on one scripted gateway; experts without tool lists so
    the test's tools are offered to every phase."""
    experts = {
        name: {
            "system_prompt": f"You are the {name}.",
            "tools": None,
            "start_phase": DEFAULT_EXPERTS[name].start_phase,
        }
        for name in ("planner", "coder", "reviewer")
    }
    # plan_exec's phase whitelists would refuse the test tools: every tool in every phase
    sections.setdefault(
        "plan_exec", {"whitelists": {p: ["*"] for p in ("planning", "building", "verification")}}
    )
    cfg = config(experts=experts, streaming={"flush_interval_ms": 0}, **sections)
    gateway = Gateway.for_script(turns, config=cfg, sleep=no_sleep)

    def engine_for(expert, verify, policy):
        return ReActEngine(gateway, ToolSet(list(tools)), cfg, phase_policy=policy)

    commands = None
    if root is not None:
        commands = RollbackExecutor(sandbox or Sandbox(), root, timeout)
    orchestrator = TeamOrchestrator(
        engine_for,
        cfg,
        hooks=hooks,
        commands=commands,
        checkpoints=checkpoints,
        template=template,
    )
    return orchestrator, gateway.provider(cfg.llm.main)


def asked_phases(provider) -> list[str]:
    """The phase each model request worked on (from its first user message)."""
    import re

    found = []
    for request in provider.requests:
        first = next(m for m in request.messages if m.role == "user")
        match = re.search(r"Your phase, as the [a-z]+: (\S+) ", first.content)
        found.append(match.group(1) if match else "?")
    return found


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def git_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    (root / "app.py").write_text("VALUE = 1\n")
    (root / "notes.txt").write_text("keep me\n")
    (root / ".gitignore").write_text("build/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


async def run_team(orchestrator, spec_draft, task=TASK, **kwargs):
    return [event async for event in orchestrator.run(task, spec_draft, **kwargs)]
