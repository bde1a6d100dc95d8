"""Verification at the final answer: the workspace's real checks, run inside the sandbox with
the network off.

How the engine gets here (the only path it takes):

    # apps/tasks/run/runner.py build_engine: one verifier per task, the workspace's and the skill's
    # verification commands as spec commands
    verifier = answer_verifier(Verifier(sandbox, config.verification), root, spec_commands)
    engine = ReActEngine(gateway, tools, config, verifier=verifier, ...)

    # apps/engine/loop/react.py, at a reply without tool calls, when verification.modes has the
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
  configuration; without one, `ruff check --isolated --select` verification.default_ruff_select),
  then any spec-declared command not already in that list (verify/commands.py);
- any other workspace runs the spec-declared commands;
- a workspace with nothing to run passes, and the result says so.

`pytest` and `ruff` come from the workspace's own `.venv` when it has them (its dependencies and
plugins are there), else from agentkit's environment (`python -m pytest`, the `ruff` next to it,
at the real path of agentkit's venv: a venv reached through a symbolic link works as a copied
one), so a workspace needs nothing installed. With agentkit's interpreter, agentkit's own
pytest plugins are not auto-loaded (only pytest-asyncio). Checks leave no droppings: no
.pytest_cache, no .ruff_cache, no __pycache__.

What the task changed is judged, not what it found: when a verifying run starts, the engine
calls `TaskVerifier.take_baseline()`; lint findings the workspace already had do not fail it (its
start is linted only for the files the task changed, verify/lint_start.py), and tests that
already failed are named as pre-existing (verify/baseline.py).

Failing output is condensed for the model (verify/condense.py): per failed command the first failure (test name,
failing line, assertion), the traceback tail, or the first lint findings. The full output is
in `log`. A command that runs out of the sandbox's memory cap gets `error_code` memory_limit
and the sandbox's advice (use less memory, or raise `sandbox.limits.memory_mb`). A sandbox that
cannot run raises `SandboxUnavailable` (an environment problem, not the model's).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Literal

from apps.engine.config import VerificationConfig
from apps.engine.plan.verify.baseline import (
    Baseline,
    concise,
    failed_test_ids,
    lint_counts,
    new_findings,
    parse_ruff_json,
    preexisting_note,
    preexisting_timeout_note,
    pytest_without_exit_first,
)
from apps.engine.plan.verify.commands import (
    has_any_file,
    has_ruff_config,
    is_python_workspace,
    prepare_command,
)
from apps.engine.plan.verify.condense import clip, condense, condense_pytest, condense_ruff, tail
from apps.engine.plan.verify.lint_start import lint_before
from apps.engine.plan.verify.results import CommandOutcome, VerificationResult
from apps.engine.ports import VerificationOutcome
from apps.engine.sandbox import Sandbox, SandboxResult

__all__ = [
    "CommandOutcome",
    "TaskVerifier",
    "VerificationResult",
    "Verifier",
    "answer_verifier",
    "condense",
    "condense_pytest",
    "condense_ruff",
    "has_ruff_config",
    "is_python_workspace",
    "prepare_command",
]

VerifyFn = Callable[[Path, Sequence[str]], Awaitable["VerificationResult"]]
"""The shape of `Verifier.__call__`: `await verify(workspace, spec_commands)`. The engine does
not call this: it calls the `answer_verifier` adapter (ports.Verifier)."""

MAX_LOG_CHARS = 200_000
PYTEST_EXIT_NO_TESTS = 5


# ── the verifier ───────────────────────────────────────────────────────────────────────────────
class Verifier:
    """Runs a workspace's checks in the sandbox (network always off). `await verifier(ws, cmds)`
    is the same as `verify`. The engine reaches it through `answer_verifier`."""

    def __init__(self, sandbox: Sandbox, config: VerificationConfig | None = None):
        self.sandbox = sandbox
        self.config = config or VerificationConfig()
        # What each workspace had wrong when its task started (take_baseline); verify and
        # run_command judge against it, so the run_tests tool sees the same verdict.
        self.baselines: dict[Path, Baseline] = {}

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

    async def take_baseline(
        self,
        workspace: str | os.PathLike[str],
        spec_commands: Sequence[str] = (),
        *,
        snapshot: Path | None = None,
    ) -> Baseline:
        """Run the workspace's `pytest` (and, without `snapshot`, `ruff check`) commands once,
        before the task changes anything; keep what already failed (verify/baseline.py). Once
        per workspace. `snapshot`: a copy of the start, to run them in while the task goes on,
        kept as the baseline's `start` (lint runs there later, on changed files: lint_start.py).
        A check that hangs past `verification.baseline_timeout_seconds` is recorded as timed
        out (with its seconds)."""
        root = Path(workspace).resolve()
        if root in self.baselines:
            return self.baselines[root]
        self.sandbox.ensure_available()
        where = snapshot or root
        _, commands = await asyncio.to_thread(self.plan, where, spec_commands)
        deadline = time.monotonic() + self.config.baseline_timeout_seconds
        lint, failing, timed_out = {}, {}, {}
        for command in commands:
            prepared = prepare_command(where, command, self.config.default_ruff_select)
            remaining = deadline - time.monotonic()
            lint_later = snapshot is not None and prepared.tool == "ruff_check"
            if prepared.tool not in ("pytest", "ruff_check") or lint_later or remaining < 1:
                continue
            argv = list(prepared.argv)
            if prepared.tool == "pytest":
                argv = pytest_without_exit_first(argv)
            result = await self.sandbox.run(
                argv, where, network=False, writable=(where,), timeout=remaining, env=prepared.env
            )
            if result.timed_out:
                if prepared.tool == "pytest":
                    timed_out[command] = round(result.duration, 1)
                continue
            output = result.combined_output()
            if prepared.tool == "pytest":
                failing[command] = failed_test_ids(output)
            elif (findings := parse_ruff_json(result.stdout, where)) is not None:
                lint[command] = lint_counts(findings)
        start = snapshot.resolve() if snapshot is not None else None
        baseline = Baseline(lint=lint, failing_tests=failing, timed_out=timed_out, start=start)
        self.baselines[root] = baseline
        return baseline

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
                outcomes.append(CommandOutcome.not_run(command, self.config.timeout_seconds))
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
            log=clip(self._log(outcomes), MAX_LOG_CHARS),
            commands=tuple(outcomes),
            duration=time.monotonic() - started,
            kind=kind,
            summary=summary,
            backend=self.sandbox.label,
        )

    async def _run_one(self, root: Path, command: str, timeout: float) -> CommandOutcome:
        prepared = prepare_command(root, command, self.config.default_ruff_select)
        result: SandboxResult = await self.sandbox.run(
            prepared.argv, root, network=False, writable=(root,), timeout=timeout, env=prepared.env
        )
        output = result.combined_output()
        note = ""
        passed = result.ok
        baseline = self.baselines.get(root, Baseline())
        if prepared.tool == "pytest" and result.exit_code == PYTEST_EXIT_NO_TESTS:
            passed, note = not result.memory_error, "no tests collected"
        findings = None
        if prepared.tool == "ruff_check" and result.exit_code in (0, 1):
            findings = parse_ruff_json(result.stdout, root)
        if findings is not None:  # only what the task added fails (verify/baseline.py)
            before = await lint_before(self.sandbox, self.config, baseline, root, command, findings)
            new, old = new_findings(findings, before)
            passed = not new
            note = f"{old} finding(s) the workspace had before the task ignored" if old else ""
            shown = [concise(finding) for finding in new]
            found = f"Found {len(new)} new error(s)." if new else "All checks passed!"
            output = "\n".join([*shown, found, *([note] if note else []), result.stderr.strip()])
        errors: tuple[str, ...] = ()
        code = "" if passed else "command_failed"
        if result.memory_error:  # first: a killed child may have left the rest waiting
            passed, code = False, "memory_limit"
            errors = (
                clip(
                    f"`{command}` ran out of memory: {result.memory_error}\n"
                    + "\n".join(tail(output.splitlines(), 15))
                ),
            )
        elif result.timed_out:
            code = "command_timeout"
            before = baseline.timed_out.get(command)
            pre = f"\n{preexisting_timeout_note(command, before)}" if before is not None else ""
            errors = (
                f"`{command}` timed out after {result.duration:.0f} s and was killed. Look for a "
                f"hanging test or an endless loop.{pre}\n"
                + "\n".join(tail(output.splitlines(), 15)),
            )
        elif not passed:
            condensed = condense(prepared.tool, output)
            if prepared.tool == "pytest" and command in baseline.failing_tests:
                pre = preexisting_note(failed_test_ids(output), baseline.failing_tests[command])
                condensed = [f"{text}\n\n{pre}" if pre else text for text in condensed]
            errors = tuple(
                clip(f"`{command}` failed (exit {result.exit_code}):\n{text}") for text in condensed
            )
        return CommandOutcome(
            command=command,
            passed=passed,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration=result.duration,
            output=clip(output, MAX_LOG_CHARS // 2),
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


class TaskVerifier:
    """The engine's `Verifier` port (ports.py) for one task: `await task_verifier(answer)` runs
    the workspace's checks (the answer's text does not matter); `await take_baseline()`, when
    the run starts, records what already failed so only the task's own changes are judged."""

    def __init__(
        self, verifier: Verifier, workspace: str | os.PathLike[str], spec_commands: Sequence[str]
    ):
        self.verifier = verifier
        self.workspace = workspace
        self.spec_commands = spec_commands  # the list a confirmed spec adds its commands to
        self._baseline: asyncio.Task | None = None  # running beside the task's first steps
        self._snapshot: tempfile.TemporaryDirectory | None = None  # the start, copied
        self._taken = False  # once per task, even after close()
        self._holders = 0  # take_baseline calls not yet closed (team: one per verifying phase)

    @property
    def coding_workspace(self) -> bool:
        """A workspace with tests or a pyproject: a react task that changed it verifies
        (verification.react_when_changed)."""
        root = Path(self.workspace)
        return (root / "tests").is_dir() or (root / "pyproject.toml").is_file()

    async def __call__(self, answer: str) -> VerificationOutcome:
        if self._baseline is not None:  # within its own budget; a failed one is no baseline
            with contextlib.suppress(Exception):
                await self._baseline
            self._baseline = None  # its copy stays: lint's baseline runs there (lint_start.py)
        result = await self.verifier.verify(self.workspace, self.spec_commands)
        return result.as_outcome()

    def close(self) -> None:
        """The run's end: the last holder stops a baseline still running and removes the copy of
        the start (a team's phases share it; the orchestrator's copy goes with the verifier)."""
        self._holders = max(0, self._holders - 1)
        if self._holders:
            return
        if self._baseline is not None and not self._baseline.done():
            self._baseline.cancel()
        self._baseline = None
        if self._snapshot is not None:
            self._snapshot.cleanup()
            self._snapshot = None

    async def take_baseline(self) -> None:
        """Once per task, before its first change (verification.baseline: false skips it):
        the workspace is copied as it is, and the baseline runs on the copy beside the task's
        first steps (never delaying step 1 by more than the copy), awaited at the first
        verification."""
        self._holders += 1
        if not self.verifier.config.baseline or self._taken:
            return
        self._taken = True
        self._snapshot = tempfile.TemporaryDirectory(prefix="agentkit-baseline-")
        snapshot = Path(self._snapshot.name) / "workspace"
        await asyncio.to_thread(
            shutil.copytree, Path(self.workspace), snapshot, symlinks=True, ignore=SNAPSHOT_SKIP
        )
        self._baseline = asyncio.create_task(
            self.verifier.take_baseline(self.workspace, self.spec_commands, snapshot=snapshot)
        )


# What the baseline's copy of a workspace leaves out: history and caches, never checked.
SNAPSHOT_SKIP = shutil.ignore_patterns(
    ".git", ".venv", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"
)


def answer_verifier(
    verifier: Verifier, workspace: str | os.PathLike[str], spec_commands: Sequence[str] = ()
) -> TaskVerifier:
    """Adapt a Verifier to the engine's port `async (final_answer) -> VerificationOutcome`, for
    one task: `ReActEngine(..., verifier=answer_verifier(Verifier(sandbox, cfg), root, cmds))`."""
    return TaskVerifier(verifier, workspace, spec_commands)
