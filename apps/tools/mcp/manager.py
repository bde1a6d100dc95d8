"""Every MCP server of the loaded configuration, in this process: one `ServerConnection` each
(connection.py), made at the first use of a configuration and closed when another replaces it.

- `prepare()` (blocking: a worker thread, before a run is built) starts the servers not yet
  started, in parallel, within their startup_timeout, and returns the ones unavailable with why;
- `tools()` (non-blocking) the Tools of the servers that are ready now, each server's allow-list
  applied;
- `status()` and `check()` for `manage.py check_mcp` and the admin's MCP page."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from fnmatch import fnmatchcase
from typing import Any

from apps.engine.config import McpServerConfig
from apps.engine.tools import Tool
from apps.tools.mcp import background
from apps.tools.mcp.adapter import McpTool, make_tool
from apps.tools.mcp.connection import ServerConnection
from apps.tools.mcp.results import to_tool_result


class McpManager:
    def __init__(self, servers: dict[str, McpServerConfig]):
        self.servers = dict(servers)
        self.connections = {
            name: ServerConnection(name, cfg) for name, cfg in sorted(self.servers.items())
        }
        self._adapted: dict[str, tuple[int, list[McpTool]]] = {}

    def _wait_budget(self) -> float:
        return max((c.startup_timeout for c in self.servers.values()), default=0.0) + 5

    def prepare(self) -> dict[str, str]:
        """Start what is not started (blocking, bounded); {server: why} of those unavailable."""

        async def ensure_all() -> list[bool]:
            return await asyncio.gather(*(c.ensure() for c in self.connections.values()))

        if self.connections:
            with contextlib.suppress(TimeoutError):
                background.call_sync(ensure_all(), self._wait_budget())
        return {
            name: conn.last_error or f"the server is {conn.state}"
            for name, conn in self.connections.items()
            if conn.state != "ready"
        }

    def tools(self) -> list[Tool]:
        found: list[Tool] = []
        for name, conn in self.connections.items():
            if conn.state != "ready":
                continue
            listed = conn.tools
            cached = self._adapted.get(name)
            if cached is None or cached[0] != id(listed):
                allow = conn.config.tools
                adapted = [
                    tool
                    for remote in listed
                    if allow is None or any(fnmatchcase(remote.name, a) for a in allow)
                    if (tool := make_tool(conn, remote)) is not None
                ]
                cached = (id(listed), adapted)
                self._adapted[name] = cached
            found.extend(cached[1])
        unique: dict[str, Tool] = {}
        for tool in found:
            unique.setdefault(tool.name, tool)
        return list(unique.values())

    def status(self) -> list[dict[str, Any]]:
        exposed = {tool.name: tool for tool in self.tools()}
        rows = []
        for conn in self.connections.values():
            row = conn.describe()
            row["exposed_tools"] = sorted(
                n for n, t in exposed.items() if isinstance(t, McpTool) and t.connection is conn
            )
            rows.append(row)
        return rows

    def check(self, name: str) -> dict[str, Any] | None:
        """Call the server's configured harmless tool (`check:`); None when none is named."""
        conn = self.connections[name]
        check = conn.config.check
        if check is None:
            return None
        budget = conn.config.startup_timeout + conn.config.call_timeout + 2
        try:
            result = background.call_sync(conn.call(check.tool, dict(check.arguments)), budget)
        except Exception as exc:
            return {"tool": check.tool, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        converted = to_tool_result(name, result).as_dict()
        return {"tool": check.tool, **converted}

    def close(self, timeout: float = 15) -> None:
        async def close_all() -> None:
            await asyncio.gather(*(c.close() for c in self.connections.values()))

        if self.connections:
            with contextlib.suppress(Exception):  # closing is best effort; the process may end
                background.call_sync(close_all(), timeout)


_lock = threading.Lock()
_current: McpManager | None = None
_pid = os.getpid()


def manager_for(servers: dict[str, McpServerConfig]) -> McpManager | None:
    """This process's manager for `servers` (None when there are none); a different mapping
    than the last one closes the old servers and starts afresh."""
    global _current, _pid
    with _lock:
        if _pid != os.getpid():  # a forked child: the parent's sessions are not ours to close
            _current, _pid = None, os.getpid()
        if _current is not None and _current.servers == dict(servers):
            return _current
        old, _current = _current, (McpManager(servers) if servers else None)
    if old is not None:
        old.close()
    return _current


def shutdown() -> None:
    global _current
    with _lock:
        old, _current = _current, None
    if old is not None:
        old.close()


atexit.register(shutdown)


def report(servers: dict[str, McpServerConfig], *, start: bool, check: bool) -> list[dict]:
    """Every configured server: state, tools, last error (what check_mcp and the admin page
    show); `start`: start those not started first; `check`: call each one's `check:` tool."""
    manager = manager_for(servers)
    if manager is None:
        return []
    if start:
        manager.prepare()
    rows = manager.status()
    for row in rows:
        row["check"] = manager.check(row["name"]) if check and row["state"] == "ready" else None
    return rows
