"""What verification runs (run.py): is the workspace a Python project, and how each command
runs — `pytest` / `ruff` from the workspace's own .venv or agentkit's (at the real path of
agentkit's venv: one reached through a symbolic link works as a copied one), `ruff check` with the
default rule set where the workspace has no ruff configuration, anything else through /bin/sh."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from apps.engine.plan.verify.baseline import is_ruff_check
from apps.engine.sandbox import sandbox_python

MARKER_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
SKIP_DIRS = frozenset(
    {".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", ".tox"}
)
SHELL_SYNTAX = re.compile(r"[|&;<>()$`\\\n*?~]")


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
class Prepared:
    display: str  # the command as the user wrote it
    argv: str | list[str]  # what the sandbox runs
    env: dict[str, str] = field(default_factory=dict)
    tool: Literal["pytest", "ruff", "ruff_check", "other"] = "other"


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


RUFF_CONFIG_FILES = ("ruff.toml", ".ruff.toml")
RUFF_RULE_FLAGS = ("--select", "--config", "--isolated", "--extend-select")


def has_ruff_config(workspace: Path) -> bool:
    """The workspace has its own ruff configuration at its root: ruff.toml, .ruff.toml, or a
    [tool.ruff] table in pyproject.toml."""
    if any((workspace / name).is_file() for name in RUFF_CONFIG_FILES):
        return True
    pyproject = workspace / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(r"^\s*\[tool\.ruff(\.|\])", text, re.MULTILINE) is not None


def prepare_command(
    workspace: Path, command: str, default_ruff_select: Sequence[str] = ()
) -> Prepared:
    """Map `pytest ...` / `ruff ...` to an interpreter that has them; anything else (or anything
    with shell syntax) runs through /bin/sh as written. `ruff check` in a workspace without its
    own ruff configuration runs `--isolated` (no configuration of a directory above it) with
    `default_ruff_select` (verification.default_ruff_select), unless the command picks rules."""
    base_env = {"PYTHONDONTWRITEBYTECODE": "1"}
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = []
    if not tokens or SHELL_SYNTAX.search(command):
        return Prepared(command, command, base_env)
    program, args = tokens[0], tokens[1:]
    python = sandbox_python()  # agentkit's, at the path the sandbox shows (links resolved)
    if program == "pytest":
        env = {**base_env, "PYTEST_ADDOPTS": "-p no:cacheprovider"}
        own_python = _workspace_tool(workspace, "python")
        if own_python and _workspace_has_pytest(workspace):
            return Prepared(command, [str(own_python), "-m", "pytest", *args], env, "pytest")
        # agentkit's interpreter: its own dev plugins (django, playwright, hypothesis) are not
        # the workspace's business; async tests are common enough to keep pytest-asyncio.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        if importlib.util.find_spec("pytest_asyncio") is not None:
            env["PYTEST_PLUGINS"] = "pytest_asyncio.plugin"
            env["PYTEST_ADDOPTS"] += " -o asyncio_default_fixture_loop_scope=function"
        return Prepared(command, [str(python), "-m", "pytest", *args], env, "pytest")
    if program == "ruff":
        env = {**base_env, "RUFF_NO_CACHE": "true", "RUFF_OUTPUT_FORMAT": "concise"}
        if is_ruff_check(tokens):
            env["RUFF_OUTPUT_FORMAT"] = "json"  # compared with the baseline (verify/baseline.py)
            picks_rules = any(arg.split("=")[0] in RUFF_RULE_FLAGS for arg in args)
            if default_ruff_select and not picks_rules and not has_ruff_config(workspace):
                args = [*args, "--isolated", "--select", ",".join(default_ruff_select)]
        ruff = _workspace_tool(workspace, "ruff") or python.parent / "ruff"
        tool: Literal["ruff", "ruff_check"] = "ruff_check" if is_ruff_check(tokens) else "ruff"
        if os.access(ruff, os.X_OK):
            return Prepared(command, [str(ruff), *args], env, tool)
        return Prepared(command, [str(python), "-m", "ruff", *args], env, tool)
    return Prepared(command, command, base_env)
