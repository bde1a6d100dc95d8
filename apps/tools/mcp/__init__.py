"""Tools from MCP servers (`mcp_servers:` in agentkit.yaml; docs/mcp.md). Framework-free, like
builtin/: the engine gets these tools through the same `Tool` protocol (apps/engine/tools.py).

- `names`: `<server>__<tool>` within the providers' 64 characters and [a-zA-Z0-9_-].
- `background`: the one event-loop thread per process the MCP sessions live on.
- `connection`: one server's session: opened lazily, kept, restarted with backoff.
- `eof`: the read stream wrapper that tells a connection its server went away.
- `results`: an MCP CallToolResult as a ToolResult (text, structured content, images, errors).
- `adapter`: an MCP tool as a `Tool` (its input schema validated like a builtin's).
- `manager`: every configured server of this process: tools for a run, state, check_mcp.
- `hand_over`: what engine_build takes: the servers started (those down named), their tools.
"""
