"""The admin's MCP page (`/admin/mcp/`): every server of `mcp_servers:` as this web process
sees it: state, tools, last error. "Start and check" starts the servers not started and calls
each one's `check:` tool (what `manage.py check_mcp` does)."""

from __future__ import annotations

from django.contrib import admin
from django.template.response import TemplateResponse

from apps.tasks.conf import agent_config


def mcp_page(request):
    # the MCP SDK costs ~0.4 s of import: only the page that shows the servers pays it, not every
    # process that loads the URLconf (tests/test_startup_imports.py)
    from apps.tools.mcp.manager import report

    run = request.method == "POST"
    rows = report(agent_config().mcp_servers, start=run, check=run)
    context = {**admin.site.each_context(request), "title": "MCP servers", "servers": rows}
    return TemplateResponse(request, "admin/mcp.html", context | {"checked": run})
