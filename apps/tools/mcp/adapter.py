"""An MCP server's tool as a `Tool` (apps/engine/tools.py): a subclass made per listed tool, so
its input schema is checked and compiled exactly as a builtin's and `ToolSet.safe_execute`
refuses bad arguments before anything reaches the server. `execute` runs the call on the
background loop (background.py) within the server's call_timeout; a cancel of the task
cancels the call."""

from __future__ import annotations

import copy
import logging
from typing import Any, ClassVar

from mcp import types as mcp_types

from apps.engine.tools import Tool, ToolResult
from apps.tools.mcp import background
from apps.tools.mcp.connection import (
    CallTimedOut,
    RemoteError,
    ServerConnection,
    ServerUnavailable,
)
from apps.tools.mcp.names import exposed_name
from apps.tools.mcp.results import to_tool_result

log = logging.getLogger(__name__)

DESCRIPTION_MAX = 1024


class McpTool(Tool):
    __abstract__ = True
    connection: ClassVar[ServerConnection]
    remote_name: ClassVar[str]

    async def execute(self, **arguments: Any) -> ToolResult:
        conn = self.connection
        server = conn.name
        budget = conn.config.startup_timeout + conn.config.call_timeout + 2
        try:
            result = await background.call(conn.call(self.remote_name, arguments), budget)
        except ServerUnavailable as exc:
            return ToolResult.failure(
                "mcp_server_unavailable",
                f"MCP server {server!r} is unavailable: {exc}. It is restarted automatically; "
                "try again later or go on without it.",
                mcp_server=server,
            )
        except (CallTimedOut, TimeoutError) as exc:
            detail = str(exc) or f"no answer within {budget:g} s"
            return ToolResult.failure(
                "tool_timeout",
                f"{self.name} was cancelled: {detail}. Ask for less, or go on without it.",
                mcp_server=server,
            )
        except RemoteError as exc:
            return ToolResult.failure(
                "mcp_tool_error",
                f"MCP server {server!r} refused the call: {exc}",
                mcp_server=server,
            )
        return to_tool_result(server, result)


def _schema(remote: mcp_types.Tool) -> dict[str, Any]:
    schema = copy.deepcopy(remote.input_schema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def make_tool(conn: ServerConnection, remote: mcp_types.Tool) -> McpTool | None:
    """The Tool for one listed MCP tool; None (logged) when its schema cannot be used."""
    name = exposed_name(conn.name, remote.name)
    text = (remote.description or remote.title or remote.name).strip()
    description = f"[MCP server {conn.name}] {text}"[:DESCRIPTION_MAX]
    try:
        cls = type(
            f"McpTool_{name}",
            (McpTool,),
            {
                "name": name,
                "description": description,
                "input_schema": _schema(remote),
                "connection": conn,
                "remote_name": remote.name,
                "__abstract__": False,  # McpTool itself is abstract; this one is a tool
            },
        )
    except (TypeError, Exception) as exc:
        log.warning("mcp server %s: tool %r left out: %s", conn.name, remote.name, exc)
        return None
    return cls()
