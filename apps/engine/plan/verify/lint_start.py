"""Lint's baseline, only for the files the task changed (verify/baseline.py, run.py).

At a verification whose `ruff check` reports findings, the findings are judged against the
task's start (the workspace's copy that `TaskVerifier.take_baseline` made):

- a file the task did not change (the same bytes as at the start) had all its findings before;
- a file the task changed is linted once more, on the start's copy, with the same command and
  only those files as its arguments: its findings there are the file's old ones;
- a file the start did not have has only new findings.

When the task changed the ruff configuration at the workspace's root (pyproject.toml, ruff.toml,
.ruff.toml), every file with findings counts as changed. A start that cannot be linted (its
copy gone, ruff timing out) gives no old findings: verification is as strict as without one.
"""

from __future__ import annotations

import filecmp
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from apps.engine.config import VerificationConfig
from apps.engine.plan.verify.baseline import (
    Baseline,
    LintKey,
    lint_counts,
    lint_key,
    parse_ruff_json,
)
from apps.engine.plan.verify.commands import prepare_command
from apps.engine.sandbox import Sandbox

RUFF_CONFIGS = ("pyproject.toml", "ruff.toml", ".ruff.toml")


def _same(root: Path, start: Path, relative: str) -> bool:
    before, now = start / relative, root / relative
    if before.is_file() and now.is_file():
        return filecmp.cmp(before, now, shallow=False)
    return not before.exists() and not now.exists()


def changed_files(root: Path, start: Path, paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """(files the task left as they were, files it changed that the start had), of `paths`."""
    config_changed = not all(_same(root, start, name) for name in RUFF_CONFIGS)
    unchanged, changed = [], []
    for path in sorted(set(paths)):
        if not config_changed and (start / path).is_file() and _same(root, start, path):
            unchanged.append(path)
        elif (start / path).is_file():
            changed.append(path)
    return unchanged, changed


async def lint_before(
    sandbox: Sandbox,
    config: VerificationConfig,
    baseline: Baseline,
    root: Path,
    command: str,
    findings: list[dict[str, Any]],
) -> Counter[LintKey]:
    """Which of `findings` (`command`'s, on `root`) the workspace already had when the task
    started: per file, as the module says. Without a start copy: the baseline's own counts."""
    start = baseline.start
    if start is None or not findings:
        return baseline.lint.get(command, Counter())
    unchanged, changed = changed_files(root, start, [f.get("path", "") for f in findings])
    kept = set(unchanged)
    before = Counter(lint_key(finding) for finding in findings if finding.get("path") in kept)
    prepared = prepare_command(start, command, config.default_ruff_select)
    if not changed or not start.is_dir() or isinstance(prepared.argv, str):
        return before
    result = await sandbox.run(
        [*prepared.argv, *changed],
        start,
        network=False,
        writable=(start,),
        timeout=config.baseline_timeout_seconds,
        env=prepared.env,
    )
    old = None if result.timed_out else parse_ruff_json(result.stdout, start)
    if old is not None:
        wanted = set(changed)
        before.update(lint_counts([finding for finding in old if finding["path"] in wanted]))
    return before
