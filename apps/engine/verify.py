"""Verification at the final answer: the workspace's real checks, run inside the sandbox with
the network off.

How the engine gets here (the only path it takes):

    # apps/tasks/runner.py build_engine: one verifier per task, the workspace's and the skill's
    # verification commands as spec commands
    verifier = answer_verifier(Verifier(sandbox, config.verification), root, spec_commands)
    engine = ReActEngine(gateway, tools, config, verifier=verifier, ...)

    # apps/engine/loop.py, at a reply without tool calls, when verification.modes has the
    # task's mode on: the answer's text does not matter, the workspace's checks decide
    outcome = await verifier(answer)                      # ports.VerificationOutcome
    # verification_gate.check: a `verification_result` event; failed → `outcome.errors` go back to
    # the model as one user message (at most verification.max_reinjections times), the loop
    # detector is reset, and the model takes another step; still failing → the run fails.

The `run_tests` tool calls `Verifier.verify(workspace, spec_commands)` directly and shows the
model the `VerificationResult`.

What runs:

- a coding workspace (pyproject.toml, setup.cfg, setup.py or any *.py file) runs
  `verification.python_commands` (default `pytest -x -q` and `ruff check`, with the project's own
  configuration), then any spec-declared command not already in that list;
- any other workspace runs the spec-declared commands;
- a workspace with nothing to run passes, and the result says so.

`pytest` and `ruff` come from the workspace's own `.venv` when it has them (its dependencies and
plugins are there), else from agentkit's environment (`python -m pytest`, the `ruff` next to it,
at the real path of agentkit's venv: a venv reached through a symbolic link works as a copied
one), so a workspace needs nothing installed. With agentkit's interpreter, agentkit's own
pytest plugins are not auto-loaded (only pytest-asyncio). Checks leave no droppings: no
.pytest_cache, no .ruff_cache, no __pycache__.

Failing output is condensed for the model: per failed command the first failure (test name,
failing line, assertion), the traceback tail, or the first lint findings. The full output is
in `log`. A command that runs out of the sandbox's memory cap gets `error_code` memory_limit
and the sandbox's advice (use less memory, or raise `sandbox.limits.memory_mb`). A sandbox that
cannot run raises `SandboxUnavailable` (an environment problem, not the model's).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import shlex
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from apps.engine.config import VerificationConfig
from apps.engine.ports import VerificationOutcome
from apps.engine.ports import Verifier as AnswerVerifier
from apps.engine.sandbox import Sandbox, SandboxResult, sandbox_python

VerifyFn = Callable[[Path, Sequence[str]], Awaitable["VerificationResult"]]
"""The shape of `Verifier.__call__`: `await verify(workspace, spec_commands)`. The engine does
not call this: it calls the `answer_verifier` adapter (ports.Verifier)."""

MARKER_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
SKIP_DIRS = frozenset(
    {".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", ".tox"}
)
MAX_LOG_CHARS = 200_000
MAX_ERROR_CHARS = 4_000
SHELL_SYNTAX = re.compile(r"[|&;<>()$`\\\n*?~]")
PYTEST_EXIT_NO_TESTS = 5


@dataclass(frozen=True)
class CommandOutcome:
    command: str  # as configured or declared, e.g. "pytest -x -q"
    passed: bool
    exit_code: int
    timed_out: bool
    duration: float
    output: str  # stdout + stderr, capped
    errors: tuple[str, ...] = ()  # condensed, for the model
    note: str = ""  # e.g. "no tests collected"
    error_code: str = ""  # failed: memory_limit | command_timeout | command_failed

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "duration": round(self.duration, 3),
            "error_code": self.error_code,
            "errors": list(self.errors),
            "exit_code": self.exit_code,
            "note": self.note,
            "output": self.output,
            "passed": self.passed,
            "timed_out": self.timed_out,
        }


@dataclass(frozen=True)
class VerificationResult:
    passed: bool
    errors: tuple[str, ...]  # what the model sees: one condensed entry per failed command
    log: str  # every command with its full (capped) output
    commands: tuple[CommandOutcome, ...]
    duration: float
    kind: Literal["python", "spec", "none"] = "none"
    summary: str = ""  # one line for humans and the UI card
    backend: str = ""

    def error_summary(self) -> str:
        """The text to re-inject as a user message after a failed verification."""
        if self.passed:
            return f"Verification passed: {self.summary}"
        ran = ", ".join(
            f"`{c.command}` ({'passed' if c.passed else 'failed'})" for c in self.commands
        )
        lines = [
            "Verification failed: your work is not done until these checks pass.",
            f"Ran in the workspace (sandboxed, network off): {ran or 'nothing'}.",
            "",
        ]
        for index, error in enumerate(self.errors, 1):
            lines += [f"{index}. {error}", ""]
        lines.append(
            "Fix the cause (not the tests, unless they are wrong), re-run the checks with the "
            "run_tests tool, then give your final answer."
        )
        return "\n".join(lines)

    def as_outcome(self) -> VerificationOutcome:
        """What the engine's `Verifier` port returns (apps/engine/ports.py)."""
        return VerificationOutcome(
            passed=self.passed,
            errors=self.errors,
            log=self.log,
            commands=tuple(outcome.command for outcome in self.commands),
            summary=self.summary,
        )

    def as_event_data(self) -> dict[str, Any]:
        """JSON-safe payload for the `verification_result` event (the chat's verification card)."""
        return {
            "backend": self.backend,
            "commands": [outcome.as_dict() for outcome in self.commands],
            "duration": round(self.duration, 3),
            "errors": list(self.errors),
            "kind": self.kind,
            "passed": self.passed,
            "summary": self.summary,
        }


# ── what to run ────────────────────────────────────────────────────────────────────────────────
def _walk_files(root: Path, limit: int = 20_000) -> Iterator[Path]:
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in filenames:
            seen += 1
            if seen > limit:
                return
            yield Path(dirpath) / name


def is_python_workspace(workspace: Path) -> bool:
    """A coding task: packaging markers at the root, or any Python file in the tree."""
    if any((workspace / marker).is_file() for marker in MARKER_FILES):
        return True
    return any(path.suffix == ".py" for path in _walk_files(workspace))


def has_any_file(workspace: Path) -> bool:
    return next(_walk_files(workspace), None) is not None


@dataclass(frozen=True)
class _Prepared:
    display: str  # the command as the user wrote it
    argv: str | list[str]  # what the sandbox runs
    env: dict[str, str] = field(default_factory=dict)
    tool: Literal["pytest", "ruff", "other"] = "other"


def _workspace_tool(workspace: Path, name: str) -> Path | None:
    candidate = workspace / ".venv" / "bin" / name
    if not Path(os.path.realpath(candidate.parent)).is_relative_to(workspace.resolve()):
        return None  # a .venv linked to a folder outside: commands cannot see it (exposure.py)
    return candidate if os.access(candidate, os.X_OK) else None


def _workspace_has_pytest(workspace: Path) -> bool:
    lib = workspace / ".venv" / "lib"
    return any(lib.glob("python3*/site-packages/pytest")) or any(
        lib.glob("python3*/site-packages/_pytest")
    )


def prepare_command(workspace: Path, command: str) -> _Prepared:
    """Map `pytest ...` / `ruff ...` to an interpreter that has them; anything else (or anything
    with shell syntax) runs through /bin/sh as written."""
    base_env = {"PYTHONDONTWRITEBYTECODE": "1"}
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = []
    if not tokens or SHELL_SYNTAX.search(command):
        return _Prepared(command, command, base_env)
    program, args = tokens[0], tokens[1:]
    python = sandbox_python()  # agentkit's, at the path the sandbox shows (links resolved)
    if program == "pytest":
        env = {**base_env, "PYTEST_ADDOPTS": "-p no:cacheprovider"}
        own_python = _workspace_tool(workspace, "python")
        if own_python and _workspace_has_pytest(workspace):
            return _Prepared(command, [str(own_python), "-m", "pytest", *args], env, "pytest")
        # agentkit's interpreter: its own dev plugins (django, playwright, hypothesis) are not
        # the workspace's business; async tests are common enough to keep pytest-asyncio.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        if importlib.util.find_spec("pytest_asyncio") is not None:
            env["PYTEST_PLUGINS"] = "pytest_asyncio.plugin"
            env["PYTEST_ADDOPTS"] += " -o asyncio_default_fixture_loop_scope=function"
        return _Prepared(command, [str(python), "-m", "pytest", *args], env, "pytest")
    if program == "ruff":
        env = {**base_env, "RUFF_NO_CACHE": "true", "RUFF_OUTPUT_FORMAT": "concise"}
        ruff = _workspace_tool(workspace, "ruff") or python.parent / "ruff"
        if os.access(ruff, os.X_OK):
            return _Prepared(command, [str(ruff), *args], env, "ruff")
        return _Prepared(command, [str(python), "-m", "ruff", *args], env, "ruff")
    return _Prepared(command, command, base_env)


# ── condensing output for the model ───────────────────────────────────────────────────────────
_SECTION = re.compile(r"^=+ (FAILURES|ERRORS) =+$")
_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")
_BANNER = re.compile(r"^=+ .* =+$")
_RUFF_FINDING = re.compile(r"^\S.*:\d+:\d+: [A-Z]+\d*\b")


def _clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[: limit // 2] + "\n[...]\n" + text[-limit // 2 :]


def _tail(lines: list[str], count: int = 30) -> list[str]:
    lines = [line for line in lines if line.strip()]
    return lines[-count:]


def condense_pytest(output: str) -> list[str]:
    """First failure (name, failing line, assertion) + traceback tail + pytest's summary."""
    lines = output.splitlines()
    summary = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    totals = next(
        (
            line.strip("= ")
            for line in reversed(lines)
            if re.search(r"\d+ (failed|passed|error|errors)\b", line)
        ),
        "",
    )
    block: list[str] = []
    name = ""
    in_section = False
    for line in lines:
        if _SECTION.match(line):
            in_section = True
            continue
        if not in_section:
            continue
        header = _HEADER.match(line)
        if header and name:
            break
        if header:
            name = header.group(1)
            continue
        if _BANNER.match(line):
            if name:
                break
            continue
        if name:
            block.append(line)
    block = [line.rstrip() for line in block]
    while block and not block[-1]:
        block.pop()
    while block and not block[0]:
        block.pop(0)
    if not block:
        return ["\n".join([*summary[:5], *_tail(lines)])]
    if len(block) > 40:  # a deep traceback: the test's start and the tail that matters
        block = [*block[:6], "    [... traceback frames omitted ...]", *block[-30:]]
    head = [f"first failure: {name}"] + ([totals] if totals else [])
    return ["\n".join([*head, *summary[:5], "", *block])]


def condense_ruff(output: str, limit: int = 20) -> list[str]:
    lines = output.splitlines()
    findings = [line for line in lines if _RUFF_FINDING.match(line)]
    if not findings:
        return ["\n".join(_tail(lines))]
    found = next((line for line in reversed(lines) if line.startswith("Found ")), "")
    shown = findings[:limit]
    if len(findings) > limit:
        shown.append(f"[... {len(findings) - limit} more findings ...]")
    return ["\n".join([*shown, found] if found else shown)]


def condense(tool: str, output: str) -> list[str]:
    if tool == "pytest":
        return condense_pytest(output)
    if tool == "ruff":
        return condense_ruff(output)
    return ["\n".join(_tail(output.splitlines()))]


# ── the verifier ───────────────────────────────────────────────────────────────────────────────
class Verifier:
    """Runs a workspace's checks in the sandbox (network always off). `await verifier(ws, cmds)`
    is the same as `verify`. The engine reaches it through `answer_verifier`."""

    def __init__(self, sandbox: Sandbox, config: VerificationConfig | None = None):
        self.sandbox = sandbox
        self.config = config or VerificationConfig()

    async def __call__(
        self, workspace: Path, spec_commands: Sequence[str] = ()
    ) -> VerificationResult:
        return await self.verify(workspace, spec_commands)

    def plan(
        self, workspace: Path, spec_commands: Sequence[str] = ()
    ) -> tuple[Literal["python", "spec", "none"], list[str]]:
        """Which commands `verify` would run, and why."""
        declared = [c.strip() for c in spec_commands if c and c.strip()]
        if is_python_workspace(workspace):
            forced = list(self.config.python_commands)
            return "python", forced + [c for c in declared if c not in forced]
        if declared:
            return "spec", list(dict.fromkeys(declared))
        return "none", []

    async def verify(
        self, workspace: str | os.PathLike[str], spec_commands: Sequence[str] = ()
    ) -> VerificationResult:
        root = Path(workspace).resolve()
        started = time.monotonic()
        # Walking a large tree must not stall the event loop (other tasks stream meanwhile).
        kind, commands = await asyncio.to_thread(self.plan, root, spec_commands)
        if not commands:
            empty = not await asyncio.to_thread(has_any_file, root)
            reason = (
                "the workspace is empty"
                if empty
                else "no Python project and no verification commands declared by the spec"
            )
            summary = f"nothing to verify: {reason}, so no command ran"
            return VerificationResult(
                passed=True,
                errors=(),
                log=summary,
                commands=(),
                duration=time.monotonic() - started,
                kind=kind,
                summary=summary,
                backend=self.sandbox.label,
            )
        return await self._run_all(root, kind, commands, started)

    async def run_command(
        self, workspace: str | os.PathLike[str], command: str
    ) -> VerificationResult:
        """One explicit command (the run_tests tool), condensed the same way."""
        root = Path(workspace).resolve()
        return await self._run_all(root, "spec", [command], time.monotonic())

    async def _run_all(
        self,
        root: Path,
        kind: Literal["python", "spec", "none"],
        commands: list[str],
        started: float,
    ) -> VerificationResult:
        self.sandbox.ensure_available()
        deadline = started + self.config.timeout_seconds
        outcomes: list[CommandOutcome] = []
        for command in commands:
            remaining = deadline - time.monotonic()
            if remaining < 1:
                outcomes.append(
                    CommandOutcome(
                        command,
                        False,
                        -1,
                        True,
                        0.0,
                        "",
                        (
                            f"`{command}` did not run: verification.timeout_seconds "
                            f"({self.config.timeout_seconds:g} s) was used up by the commands "
                            "before it",
                        ),
                        error_code="command_timeout",
                    )
                )
                continue
            outcomes.append(await self._run_one(root, command, remaining))
        passed = all(outcome.passed for outcome in outcomes)
        errors = tuple(error for outcome in outcomes for error in outcome.errors)
        summary = "; ".join(
            f"{o.command}: {'passed' if o.passed else 'FAILED'}{f' ({o.note})' if o.note else ''}"
            for o in outcomes
        )
        return VerificationResult(
            passed=passed,
            errors=errors,
            log=_clip(self._log(outcomes), MAX_LOG_CHARS),
            commands=tuple(outcomes),
            duration=time.monotonic() - started,
            kind=kind,
            summary=summary,
            backend=self.sandbox.label,
        )

    async def _run_one(self, root: Path, command: str, timeout: float) -> CommandOutcome:
        prepared = prepare_command(root, command)
        result: SandboxResult = await self.sandbox.run(
            prepared.argv, root, network=False, writable=(root,), timeout=timeout, env=prepared.env
        )
        output = result.combined_output()
        note = ""
        passed = result.ok
        if prepared.tool == "pytest" and result.exit_code == PYTEST_EXIT_NO_TESTS:
            passed, note = not result.memory_error, "no tests collected"
        errors: tuple[str, ...] = ()
        code = "" if passed else "command_failed"
        if result.memory_error:  # first: a killed child may have left the rest waiting
            code = "memory_limit"
            errors = (
                _clip(
                    f"`{command}` ran out of memory: {result.memory_error}\n"
                    + "\n".join(_tail(output.splitlines(), 15))
                ),
            )
        elif result.timed_out:
            code = "command_timeout"
            errors = (
                f"`{command}` timed out after {result.duration:.0f} s and was killed. Look for a "
                f"hanging test or an endless loop.\n" + "\n".join(_tail(output.splitlines(), 15)),
            )
        elif not passed:
            condensed = condense(prepared.tool, output)
            errors = tuple(
                _clip(f"`{command}` failed (exit {result.exit_code}):\n{text}")
                for text in condensed
            )
        return CommandOutcome(
            command=command,
            passed=passed,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration=result.duration,
            output=_clip(output, MAX_LOG_CHARS // 2),
            errors=errors,
            note=note,
            error_code=code,
        )

    @staticmethod
    def _log(outcomes: Sequence[CommandOutcome]) -> str:
        parts = []
        for o in outcomes:
            status = "timed out" if o.timed_out else f"exit {o.exit_code}"
            parts.append(f"$ {o.command}\n{o.output.rstrip()}\n[{status} in {o.duration:.2f} s]")
        return "\n\n".join(parts)


def answer_verifier(
    verifier: Verifier, workspace: str | os.PathLike[str], spec_commands: Sequence[str] = ()
) -> AnswerVerifier:
    """Adapt a Verifier to the engine's port `async (final_answer) -> VerificationOutcome`, for
    one task: `ReActEngine(..., verifier=answer_verifier(Verifier(sandbox, cfg), root, cmds))`.
    The answer's text does not matter: the workspace's checks decide."""

    async def verify_answer(answer: str) -> VerificationOutcome:
        result = await verifier.verify(workspace, spec_commands)
        return result.as_outcome()

    return verify_answer
