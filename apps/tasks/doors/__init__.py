"""The doors: where requests come in. The JSON API (`api`, `api_branches`, `api_workspaces`),
the chat socket (`consumers`) and what a message starts (`intake`), the pages (`views`),
`/healthz` (`health`), `/metrics` (`metrics_view`) and the tools of agentkit's MCP server
(`mcp_server`).

Thin: each validates its input and calls the services, the selectors, or an executor to start a
run; never the runner's internals (an import-linter contract in pyproject.toml).
"""
