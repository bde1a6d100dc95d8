"""`mcp_servers`: the MCP servers whose tools the agent gets (apps/tools/mcp, docs/mcp.md).

Each entry is admin configuration and a trust boundary: a `stdio` server is a program agentkit
starts as its own user, outside the sandbox. Secrets never sit in the file: `env` names the
environment variables passed to a stdio server, `headers` maps an HTTP header to the variable
holding its value."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from apps.engine.config.base import PositiveFloat, Section

SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*$")  # no "__", no edge "_"
SERVER_NAME_MAX = 24  # `<server>__<tool>` must fit the providers' 64 characters
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class McpCheckConfig(Section):
    """The harmless call `manage.py check_mcp` makes (a tool name as the server calls it)."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class McpServerConfig(Section):
    transport: Literal["stdio", "streamable_http"] = "stdio"
    # stdio: the program, its arguments, its working directory and the names of the
    # environment variables it gets (besides HOME, PATH, ... that the MCP SDK always passes).
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    cwd: str | None = None
    env: list[str] = Field(default_factory=list)
    # streamable_http: the endpoint, and header name -> environment variable with its value.
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    startup_timeout: PositiveFloat = 30.0  # seconds to start, initialize and list tools
    call_timeout: PositiveFloat = 60.0  # seconds per tool call; past it: `tool_timeout`
    # Allow-list of the server's tool names (globs allowed); None: every tool it lists.
    tools: list[str] | None = None
    check: McpCheckConfig | None = None  # manage.py check_mcp calls this tool

    @model_validator(mode="after")
    def _transport_fields(self) -> McpServerConfig:
        if self.transport == "stdio":
            if not self.command:
                raise ValueError("transport stdio needs `command` (the program to start)")
            if self.url or self.headers:
                raise ValueError("`url` and `headers` belong to transport streamable_http")
        else:
            if not self.url or not self.url.startswith(("http://", "https://")):
                raise ValueError("transport streamable_http needs `url` (http:// or https://)")
            if self.command or self.args or self.cwd or self.env:
                raise ValueError("`command`, `args`, `cwd` and `env` belong to transport stdio")
        for name in [*self.env, *self.headers.values()]:
            if not ENV_NAME.match(name):
                raise ValueError(
                    f"{name!r} is not an environment variable name: `env` and `headers` name "
                    "variables, they never hold the values themselves"
                )
        return self


def mcp_server_errors(servers: dict[str, McpServerConfig]) -> list[str]:
    problems = []
    for name in sorted(servers):
        if not SERVER_NAME.match(name) or len(name) > SERVER_NAME_MAX:
            problems.append(
                f"mcp_servers.{name}: a server name is letters, digits, '-' and single '_' "
                f"(no '__'), at most {SERVER_NAME_MAX} characters: its tools are `<name>__<tool>`"
            )
    return problems


def is_mcp_tool_ref(name: str, servers: dict[str, Any]) -> bool:
    """`<server>__<tool or glob>` naming a configured server (skills' tools, whitelists)."""
    server, sep, rest = name.partition("__")
    return bool(sep) and bool(rest) and server in servers
