"""Atomic phase rollback (seed 001 U4, R19–R21, KTD6–KTD8): the commands a team_collab spec phase
may declare run here, in the sandbox, never through the shell tool.

- `RollbackExecutor.run(command)` runs a phase's `validation_command` or `rollback_command` in the
  workspace, in the sandbox (no network, the workspace only), killed with its whole process tree
  at `rollback.timeout_seconds`. A non-zero exit, a timeout or an unusable sandbox is a failure
  whose output says why.
- `GitSnapshots` backs `rollback_command: "@snapshot"`: before such a phase it records the whole
  working tree (tracked and untracked files, not ignored ones) as a commit under
  `refs/agentkit/snapshots/<task>/<phase>`, through a throwaway index, so the user's branch,
  HEAD and index are never touched; restoring writes that tree back and deletes the files the
  phase added. Outside a git work tree it refuses with a clear error. Git runs in the sandbox
  too, with hooks and fsmonitor off: the repository's own config cannot run code on the host.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps.engine.sandbox import Sandbox, SandboxUnavailable

OUTPUT_MAX_CHARS = 4000
SNAPSHOT_REF_PREFIX = "refs/agentkit/snapshots"

# Every git call: repositories owned by another uid are fine (the sandbox maps the user), and
# nothing the repository configures (hooks, fsmonitor) runs.
_GIT = (
    "g() { git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false "
    '-c user.name=agentkit -c user.email=agentkit@localhost "$@"; }'
)
_TEMP_INDEX = (
    'idx="$(mktemp)"; rm -f "$idx"; export GIT_INDEX_FILE="$idx"; trap \'rm -f "$idx"\' EXIT'
)

_TAKE = """set -e
{git}
{index}
g add -A
tree="$(g write-tree)"
parent="$(g rev-parse -q --verify HEAD || true)"
commit="$(g commit-tree "$tree" ${{parent:+-p "$parent"}} -m {message})"
g update-ref {ref} "$commit"
echo "$commit"
"""

_RESTORE = """set -e
{git}
{index}
g read-tree {commit}
g ls-files -z --others --exclude-standard | xargs -0 -r rm -f --
g checkout-index -a -f
"""


class SnapshotError(RuntimeError):
    """A snapshot that cannot be taken; the message says what to do."""


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    command: str
    passed: bool
    exit_code: int
    output: str  # stdout then stderr, cut to OUTPUT_MAX_CHARS
    timed_out: bool = False
    duration: float = 0.0

    def event_data(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "passed": self.passed,
            "exit_code": self.exit_code,
            "output": self.output,
            "timed_out": self.timed_out,
            "duration_ms": round(self.duration * 1000, 3),
        }


def _cut(text: str) -> str:
    if len(text) <= OUTPUT_MAX_CHARS:
        return text
    half = OUTPUT_MAX_CHARS // 2
    return f"{text[:half]}\n[... cut ...]\n{text[-half:]}"


class RollbackExecutor:
    """Runs validation and rollback commands in the sandbox, in the workspace, with a timeout."""

    def __init__(self, sandbox: Sandbox, root: Path, timeout: float):
        self.sandbox, self.root, self.timeout = sandbox, Path(root), timeout

    async def run(self, command: str, *, label: str | None = None) -> CommandOutcome:
        shown = label or command
        try:
            result = await self.sandbox.run(command, self.root, timeout=self.timeout)
        except (SandboxUnavailable, FileNotFoundError) as exc:
            return CommandOutcome(shown, False, -1, f"could not run in the sandbox: {exc}")
        output = result.combined_output()
        if result.timed_out:
            output = f"{output}\nkilled after {self.timeout:g}s (rollback.timeout_seconds)".strip()
        return CommandOutcome(
            command=shown,
            passed=result.ok,
            exit_code=result.exit_code,
            output=_cut(output),
            timed_out=result.timed_out,
            duration=result.duration,
        )


class GitSnapshots:
    """`@snapshot`: the working tree recorded before a phase, restored when it fails."""

    def __init__(self, executor: RollbackExecutor, task_id: int | str):
        self.executor = executor
        self.task_id = re.sub(r"[^A-Za-z0-9_-]", "_", str(task_id))

    def available(self) -> bool:
        """A git work tree at the workspace root (a `.git` directory, or file for worktrees)."""
        return (self.executor.root / ".git").exists()

    def ref(self, phase_id: str) -> str:
        return f"{SNAPSHOT_REF_PREFIX}/{self.task_id}/{phase_id}"

    async def take(self, phase_id: str) -> str:
        """Record the working tree; returns the snapshot commit. Raises SnapshotError."""
        if not self.available():
            raise SnapshotError(
                f"rollback_command @snapshot needs a git repository at the workspace root "
                f"({self.executor.root.name} has no .git); run `git init` there, or give the "
                "phase a rollback command of its own"
            )
        script = _TAKE.format(
            git=_GIT,
            index=_TEMP_INDEX,
            message=shlex.quote(f"agentkit snapshot before phase {phase_id}"),
            ref=shlex.quote(self.ref(phase_id)),
        )
        outcome = await self.executor.run(script, label=f"@snapshot take {phase_id}")
        commit = outcome.output.strip().splitlines()[-1] if outcome.output.strip() else ""
        if not outcome.passed or not re.fullmatch(r"[0-9a-f]{40,64}", commit):
            raise SnapshotError(
                f"could not snapshot the workspace before phase {phase_id}: "
                f"{outcome.output.strip() or f'exit {outcome.exit_code}'}"
            )
        return commit

    async def restore(self, commit: str) -> CommandOutcome:
        """Write the snapshot's files back and delete the files added since (ignored ones kept)."""
        if not re.fullmatch(r"[0-9a-f]{40,64}", commit):
            return CommandOutcome("@snapshot", False, -1, f"not a snapshot commit: {commit!r}")
        script = _RESTORE.format(git=_GIT, index=_TEMP_INDEX, commit=commit)
        return await self.executor.run(script, label="@snapshot")
