"""The admin's MCP page (`/admin/mcp/`): every server of `mcp_servers:` as this web process
sees it: state, tools, last error. "Start and check" starts the servers not started and calls
each one's `check:` tool (what `manage.py check_mcp` does)."""

from __future__ import annotations

from django.contrib import admin
from django.template.response import TemplateResponse

from apps.tasks.conf import agent_config
from apps.tools.mcp.manager import report


def mcp_page(request):
    run = request.method == "POST"
    rows = report(agent_config().mcp_servers, start=run, check=run)
    context = {**admin.site.each_context(request), "title": "MCP servers", "servers": rows}
    return TemplateResponse(request, "admin/mcp.html", context | {"checked": run})
