"""Fixtures for the file tools: a real workspace directory, a directory outside it holding a
secret, and `call`, which runs a tool the way the engine does (schema check included) on one
set of tool instances per test, so the editor's undo history carries across calls; and
`python_file`, the read_file tests' cart.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from apps.engine.tools import ToolResult, ToolSet
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import build_tools
from tests.tools.read_file_support import PYTHON

FILE_TOOLS = ("read_file", "search", "str_replace_editor")
SECRET = "TOP SECRET: must never be read or written by a workspace tool\n"

Call = Callable[..., Awaitable[ToolResult]]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace with a secret file in it."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text(SECRET)
    return directory


@pytest.fixture
def toolset(workspace: Path) -> ToolSet:
    return ToolSet(build_tools(ToolContext(root=workspace), FILE_TOOLS))


@pytest.fixture
def call(toolset: ToolSet) -> Call:
    async def run(name: str, **arguments: object) -> ToolResult:
        return await toolset.safe_execute(name, arguments)

    return run


@pytest.fixture
def python_file(workspace: Path) -> str:
    (workspace / "cart.py").write_text(PYTHON)
    return "cart.py"


def numbered_text(output: str) -> str:
    """The file text inside view / read_file output: numbered lines only, numbers removed."""
    lines = []
    for line in output.split("\n"):
        number, tab, text = line.partition("\t")
        if tab and number.strip().isdigit():
            lines.append(text)
    return "\n".join(lines)
