"""An MCP server made with the official SDK's own `MCPServer` (not agentkit code), for the tests
that need what the reference servers cannot do on demand: a slow call to kill or time out, a
call counter, the streamable HTTP transport. `python sdk_server.py stdio` or
`python sdk_server.py http PORT`."""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("agentkit-test-server")
CALLS = {"echo": 0}


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    CALLS["echo"] += 1
    return f"echo: {text}"


@server.tool()
def echo_calls() -> str:
    """How many times echo ran in this process."""
    return str(CALLS["echo"])


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool `name` (it echoes) and tell the client the tool list changed."""

    def added(text: str) -> str:
        return f"{name}: {text}"

    server.add_tool(added, name=name, description=f"added at run time: {name}")
    await ctx.request_context.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails (the result has isError)."""
    raise ToolError(reason)


if __name__ == "__main__":
    if sys.argv[1] == "http":
        asyncio.run(server.run_streamable_http_async(host="127.0.0.1", port=int(sys.argv[2])))
    else:
        server.run("stdio")
