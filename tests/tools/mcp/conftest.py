"""MCP servers for the tests, started by the tests: the PyPI reference servers `mcp-server-time`
and `mcp-server-git` over stdio, and sdk_server.py (the official SDK's MCPServer) over stdio or
streamable HTTP. `servers(...)` gives a started McpManager, closed at the end of the test."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.engine.config import McpServerConfig
from apps.engine.tools import ToolSet
from apps.tools.mcp.manager import McpManager
from tests.support import VENV_BIN, free_port, wait_for_port

SDK_SERVER = Path(__file__).with_name("sdk_server.py")


def time_server(**extra) -> dict:
    return {
        "command": str(VENV_BIN / "mcp-server-time"),
        "args": ["--local-timezone", "UTC"],
        **extra,
    }


def git_server(repo: Path, **extra) -> dict:
    return {
        "command": str(VENV_BIN / "mcp-server-git"),
        "args": ["--repository", str(repo)],
        **extra,
    }


def sdk_server(**extra) -> dict:
    return {"command": sys.executable, "args": [str(SDK_SERVER), "stdio"], **extra}


@pytest.fixture
def servers() -> Iterator:
    made: list[McpManager] = []

    def start(**configs: dict) -> tuple[McpManager, ToolSet, dict[str, str]]:
        manager = McpManager({n: McpServerConfig(**c) for n, c in configs.items()})
        made.append(manager)
        down = manager.prepare()
        return manager, ToolSet(manager.tools()), down

    yield start
    for manager in made:
        manager.close()


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "HOME": str(tmp_path),
    }
    for cmd in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "first"]):
        if cmd[0] == "add":
            (repo / "README.md").write_text("hello\n")
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env, capture_output=True)
    (repo / "new.txt").write_text("untracked\n")
    return repo


@pytest.fixture
def http_server() -> Iterator[str]:
    """sdk_server.py over streamable HTTP on a free port: its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SDK_SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, timeout=30, process=proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
