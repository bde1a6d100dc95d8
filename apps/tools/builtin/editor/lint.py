"""Lint delta: after an edit of a Python file, the `ruff check` problems the new content has and
the old one did not (matched by code, message and line text, so moved problems are not new)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from apps.engine.tools import ToolResult

LINT_TIMEOUT_SECONDS = 20.0


def find_ruff() -> str | None:
    """The ruff next to this interpreter (the project venv), else the one on PATH."""
    beside = Path(sys.executable).with_name("ruff")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("ruff")


async def lint_delta(
    root: Path, shown: str, before: str | None, after: str
) -> list[dict[str, Any]] | None:
    """The ruff problems of `after` that `before` did not have (matched by code, message and
    line text, so problems that only moved are not new). None when ruff cannot run."""
    ruff = find_ruff()
    if ruff is None:
        return None
    runs = [_ruff_check(ruff, root, shown, after)]
    if before:
        runs.append(_ruff_check(ruff, root, shown, before))
    results = await asyncio.gather(*runs)
    if any(result is None for result in results):
        return None
    after_problems = results[0] or []
    before_problems = results[1] if len(results) > 1 else []
    old = Counter(_problem_key(p, before or "") for p in before_problems or [])
    new = []
    for problem in after_problems:
        key = _problem_key(problem, after)
        if old[key] > 0:
            old[key] -= 1
            continue
        location = problem.get("location") or {}
        new.append(
            {
                "code": problem.get("code") or "syntax-error",
                "message": problem.get("message", ""),
                "line": location.get("row"),
                "column": location.get("column"),
            }
        )
    return new


def _problem_key(problem: dict[str, Any], text: str) -> tuple[str, str, str]:
    row = (problem.get("location") or {}).get("row") or 0
    lines = text.split("\n")
    line = lines[row - 1].strip() if 0 < row <= len(lines) else ""
    return problem.get("code") or "syntax-error", problem.get("message", ""), line


async def _ruff_check(ruff: str, root: Path, shown: str, text: str) -> list[dict] | None:
    try:
        process = await asyncio.create_subprocess_exec(
            ruff,
            "check",
            "--output-format=json",
            "--exit-zero",
            "--no-cache",
            "--stdin-filename",
            shown,
            "-",
            cwd=root,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError:
        return None
    try:
        stdout, _ = await asyncio.wait_for(
            process.communicate(text.encode("utf-8", errors="surrogatepass")),
            LINT_TIMEOUT_SECONDS,
        )
    except TimeoutError:
        process.kill()
        await process.wait()
        return None
    if process.returncode != 0:
        return None  # e.g. an invalid ruff configuration in the workspace
    try:
        problems = json.loads(stdout or b"[]")
    except json.JSONDecodeError:
        return None
    return problems if isinstance(problems, list) else None


def with_lint(result: ToolResult, lint: list[dict] | None) -> ToolResult:
    if lint is None:
        return result
    result.data["lint"] = lint
    if lint:
        shown = result.data.get("path", "")
        listed = "\n".join(
            f"  {shown}:{p['line']}:{p['column']}: {p['code']} {p['message']}" for p in lint[:20]
        )
        more = f"\n  ... and {len(lint) - 20} more" if len(lint) > 20 else ""
        result.output += (
            f"\n\nruff: this edit introduced {len(lint)} new problem"
            f"{'s' if len(lint) > 1 else ''}:\n{listed}{more}"
        )
    return result
