"""What a builtin tool knows about the run it serves. Built by apps/tasks/run/runner.py (or by
`manage.py call_tool`), passed to every tool's constructor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ToolContext:
    root: Path  # the workspace directory; every path a tool touches must stay inside it
    sandbox: Any | None = None  # apps.engine.sandbox runner, for shell / run_tests
    network: bool = False  # shell commands may use the network (never during verification)
    timeout_seconds: float = 120.0
    # Phase hook: returns a refusal message for a command the current phase forbids, else None.
    command_filter: Callable[[str], str | None] | None = None
    verification_commands: tuple[str, ...] = ()
    verifier: Any | None = (
        None  # apps.engine.plan.verify.run.Verifier, shared by run_tests and the engine
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).resolve())
