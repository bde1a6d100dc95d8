"""What a run gets from the MCP servers (apps/tasks/run/engine_build.py calls these two).

`with_mcp_servers(agent_task, config)` — blocking, in the worker thread that prepares the run —
starts the configured servers not yet started; a server that is unavailable is named, with why
(its stderr tail), in the task's facts, so the model knows its tools are absent and the run goes
on without them. `mcp_tools(config)` — non-blocking — the Tools of the servers ready now.

The MCP SDK (~0.4 s of import) is imported only when a configuration names servers: every
process that builds runs imports this module, and most configurations have none."""

from __future__ import annotations

import logging
from dataclasses import replace

from apps.engine.config import AgentkitConfig
from apps.engine.task import AgentTask
from apps.engine.tools import Tool

log = logging.getLogger(__name__)

FACT = "mcp_servers_unavailable"
WHY_MAX = 600


def with_mcp_servers(agent_task: AgentTask, config: AgentkitConfig) -> AgentTask:
    if not config.mcp_servers or agent_task.mode == "direct_chat":
        return agent_task
    from apps.tools.mcp.manager import manager_for

    manager = manager_for(config.mcp_servers)
    if manager is None:
        return agent_task
    down = manager.prepare()
    if not down:
        return agent_task
    for name, why in sorted(down.items()):
        log.warning("task %s: MCP server %s unavailable: %s", agent_task.task_id, name, why)
    text = "; ".join(
        f"{name} ({why[:WHY_MAX]}): its tools ({name}__*) are absent from this run"
        for name, why in sorted(down.items())
    )
    return replace(agent_task, facts={**agent_task.facts, FACT: text})


def mcp_tools(config: AgentkitConfig) -> list[Tool]:
    if not config.mcp_servers:
        return []
    from apps.tools.mcp.manager import manager_for

    manager = manager_for(config.mcp_servers)
    return manager.tools() if manager is not None else []
