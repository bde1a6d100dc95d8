"""The Django side of failure handling (apps/engine/failure/fallback.py): salvage of what a failed task
changed in its workspace (git when the workspace is under git, else the editor's diffs), and the
scrubbing of internal paths and secrets out of error texts before they are stored or shown."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from apps.engine.config import AgentkitConfig
from apps.engine.failure.fallback import scrub
from apps.engine.failure.recovery import edits_salvage

GIT_TIMEOUT_SECONDS = 10.0
MAX_SALVAGE_CHARS = 200_000
MAX_UNTRACKED_FILES = 50


def internal_paths(root: str | Path | None = None) -> list[str]:
    """Paths that must not reach the browser: the checkout, the venv, the interpreter, the
    workspace root, the home directory."""
    paths = [str(settings.BASE_DIR), sys.prefix, sys.base_prefix, os.path.expanduser("~")]
    if root:
        paths.append(str(root))
    return [p for p in paths if p and p != "/"]


def secrets_of(config: AgentkitConfig) -> list[str]:
    """The values of the API key variables the configured models name."""
    names = {m.api_key_env for m in config.models.values() if getattr(m, "api_key_env", None)}
    return [value for name in names if (value := os.environ.get(name))]


def scrub_struct(struct: dict[str, Any] | None, paths: list[str], secrets: list[str]) -> Any:
    if not isinstance(struct, dict):
        return struct
    clean = dict(struct)
    if isinstance(clean.get("message"), str):
        clean["message"] = scrub(clean["message"], paths=paths, secrets=secrets)
    if isinstance(clean.get("suggestions"), list):
        clean["suggestions"] = [
            scrub(s, paths=paths, secrets=secrets) if isinstance(s, str) else s
            for s in clean["suggestions"]
        ]
    return clean


# Events that carry error texts (an LLM error may quote a path or echo what it was sent).
ERROR_EVENTS = frozenset(
    {
        "error",
        "task_finished",
        "recovery_started",
        "recovery_finished",
        # team_collab: a phase's error and its rollback commands' output
        "phase_failed",
        "phase_rollback_started",
        "phase_rollback_completed",
        "phase_rollback_failed",
    }
)


def _scrub_all(value: Any, paths: list[str], secrets: list[str]) -> Any:
    if isinstance(value, str):
        return scrub(value, paths=paths, secrets=secrets)
    if isinstance(value, dict):
        return {k: _scrub_all(v, paths, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_all(v, paths, secrets) for v in value]
    return value


def scrub_event(kind: str, data: dict[str, Any], paths: list[str], secrets: list[str]) -> dict:
    """An error-carrying event with every text in it scrubbed (a salvaged diff included: its
    paths are relative anyway); other events unchanged."""
    if kind in ERROR_EVENTS:
        return _scrub_all(data, paths, secrets)
    return data


async def _git(root: Path, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "git",
        "-C",
        str(root),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat"},
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), GIT_TIMEOUT_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        return 124, ""
    return process.returncode or 0, out.decode("utf-8", "replace")


async def git_salvage(root: Path) -> dict[str, Any] | None:
    """The workspace's uncommitted changes (tracked and new files) as one diff; None when the
    workspace is not under git or nothing changed."""
    code, inside = await _git(root, "rev-parse", "--is-inside-work-tree")
    if code != 0 or inside.strip() != "true":
        return None
    _, tracked = await _git(root, "diff", "--no-color", "HEAD", "--", ".")
    _, names = await _git(root, "diff", "--name-only", "HEAD", "--", ".")
    _, untracked = await _git(root, "ls-files", "--others", "--exclude-standard", "--", ".")
    new_files = [n for n in untracked.splitlines() if n][:MAX_UNTRACKED_FILES]
    parts = [tracked] if tracked else []
    for name in new_files:
        _, diff = await _git(root, "diff", "--no-color", "--no-index", "/dev/null", name)
        parts.append(diff)
    files = [n for n in names.splitlines() if n] + new_files
    if not files:
        return None
    diff = "".join(parts)
    if len(diff) > MAX_SALVAGE_CHARS:
        diff = diff[:MAX_SALVAGE_CHARS] + f"\n... diff cut at {MAX_SALVAGE_CHARS} characters\n"
    return {"source": "git", "files": files, "diff": diff}


def salvager_for(root: Path):
    """The engine's Salvager port for a workspace: git first, else the editor's diffs."""

    async def salvage(edits: list[dict[str, str]]) -> dict[str, Any] | None:
        return await git_salvage(root) or edits_salvage(edits)

    return salvage
