"""What the workspace already had wrong when the task started, so verification judges what the
task changed (run.py).

When a run that verifies starts (loop/setup.py take_baseline, at the run's start; team_collab:
orchestrator.py, before the first phase), `TaskVerifier.take_baseline()` copies the workspace as
it is (only the copy delays step 1) and runs its checks on the copy, in the sandbox, beside the
task's first steps, within `verification.baseline_timeout_seconds`; the first verification
awaits it:

- every `pytest` command without `-x` / `--maxfail`: the test ids that failed or errored, and a
  command that hung, with the seconds it ran (`timed_out`);
- `ruff check` does not run then: the copy is kept as the baseline's `start`, and at a
  verification whose `ruff check` has findings, the start is linted only for the files the task
  changed (verify/lint_start.py). Findings are counted by (file, code, message), so a finding
  that only moved, or sits on a line the task edited, is still the old one.
  (`Verifier.take_baseline` without a copy lints the whole workspace then: it is the start.)

At the final answer, `ruff check` fails only on findings beyond the start's counts (the old
ones are listed as ignored in the command's note), and a pytest failure whose test already
failed at the start is named as pre-existing in the message the model gets. Pre-existing test
failures still fail verification: a bug-fix task is exactly a failing test made to pass.

A baseline that cannot be taken (sandbox missing, a check timing out) leaves verification as
strict as without one; it never stops the task.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_FAILED_TEST = re.compile(r"^(?:FAILED|ERROR) (\S+)")
_EXIT_FIRST = frozenset({"-x", "--exitfirst"})

LintKey = tuple[str, str, str]  # (path relative to the workspace, code, message)


@dataclass(frozen=True)
class Baseline:
    """The workspace's checks as they were before the task: per command."""

    lint: dict[str, Counter[LintKey]] = field(default_factory=dict)  # "ruff check ..." → findings
    failing_tests: dict[str, frozenset[str]] = field(default_factory=dict)  # "pytest ..." → ids
    # "pytest ..." → the seconds it ran before its budget killed it: it hung before the change
    timed_out: dict[str, float] = field(default_factory=dict)
    # the copy of the workspace as it was at the start, where lint runs on the changed files
    start: Path | None = None

    @property
    def empty(self) -> bool:
        return not self.lint and not self.failing_tests and not self.timed_out


def is_ruff_check(argv: list[str]) -> bool:
    return "check" in argv[1:3] and not any(a.startswith("--output-format") for a in argv)


def pytest_without_exit_first(argv: list[str]) -> list[str]:
    """The baseline collects every failing test, not only the first."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in _EXIT_FIRST or arg.startswith("--maxfail="):
            continue
        if arg == "--maxfail":
            skip = True
            continue
        kept.append(arg)
    return kept


def failed_test_ids(output: str) -> frozenset[str]:
    """Test ids of pytest's short summary (`FAILED tests/test_x.py::test_y - ...`)."""
    return frozenset(
        match.group(1) for line in output.splitlines() if (match := _FAILED_TEST.match(line))
    )


def parse_ruff_json(output: str, root: Path) -> list[dict[str, Any]] | None:
    """ruff's JSON findings (stdout may carry a warning line before them); None: not JSON."""
    start = output.find("[")
    if start < 0:
        return None
    try:
        findings = json.loads(output[start : output.rfind("]") + 1])
    except json.JSONDecodeError:
        return None
    if not isinstance(findings, list):
        return None
    for finding in findings:
        finding["path"] = _relative(str(finding.get("filename", "")), root)
    return findings


def lint_key(finding: dict[str, Any]) -> LintKey:
    return (
        finding.get("path", ""),
        finding.get("code") or "syntax-error",
        finding.get("message", ""),
    )


def lint_counts(findings: list[dict[str, Any]]) -> Counter[LintKey]:
    return Counter(lint_key(finding) for finding in findings)


def new_findings(
    findings: list[dict[str, Any]], before: Counter[LintKey]
) -> tuple[list[dict[str, Any]], int]:
    """The findings beyond the baseline's counts, and how many old ones were left out."""
    remaining = Counter(before)
    new, old = [], 0
    for finding in findings:
        key = lint_key(finding)
        if remaining[key] > 0:
            remaining[key] -= 1
            old += 1
        else:
            new.append(finding)
    return new, old


def concise(finding: dict[str, Any]) -> str:
    """A finding as ruff's concise format prints it: `path:row:col: CODE message`."""
    location = finding.get("location") or {}
    code = finding.get("code") or "syntax-error"
    return (
        f"{finding.get('path', '')}:{location.get('row', 0)}:{location.get('column', 0)}: "
        f"{code} {finding.get('message', '')}"
    )


def preexisting_note(failed: frozenset[str], before: frozenset[str]) -> str:
    """The lines that name the failing tests that already failed when the task started."""
    old = sorted(failed & before)
    if not old:
        return ""
    listed = "\n".join(f"  - {test_id}" for test_id in old[:10])
    more = f"\n  ... and {len(old) - 10} more" if len(old) > 10 else ""
    return (
        "Pre-existing: these tests were already failing when the task started (not caused by "
        f"your changes):\n{listed}{more}\nThey still count: make them pass if the task is about "
        "them; otherwise leave them and say in your answer that they failed before you started."
    )


def preexisting_timeout_note(command: str, seconds: float) -> str:
    """The line that says a check already hung before the task changed anything."""
    return (
        f"Pre-existing: `{command}` already timed out after {seconds:.0f} s when the task "
        "started, before your changes (a hanging test or an endless loop in the code under "
        "test): fix the hang if the task is about it."
    )


def display_argv(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return []


def _relative(filename: str, root: Path) -> str:
    try:
        return str(Path(filename).resolve().relative_to(root))
    except (ValueError, OSError):
        return filename
