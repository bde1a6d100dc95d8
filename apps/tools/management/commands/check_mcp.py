"""`python manage.py check_mcp [--json]`: start every server of `mcp_servers:` (agentkit.yaml),
then list each one's state, its tools (as the model sees them: `<server>__<tool>`) and its last
error (a failed start says its stderr tail), and call the harmless tool its `check:` names.
Exit status 1 when a server is not ready or its check call failed, 0 otherwise."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand

from apps.tasks.conf import agent_config
from apps.tools.mcp.manager import report, shutdown


class Command(BaseCommand):
    help = "Start the configured MCP servers, list their state and tools, call their check tool."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args, **options):
        config = agent_config()
        try:
            rows = report(config.mcp_servers, start=True, check=True)
        finally:
            shutdown()
        healthy = all(
            row["state"] == "ready" and (row["check"] is None or row["check"].get("ok"))
            for row in rows
        )
        if options["json"]:
            self.stdout.write(json.dumps({"ok": healthy, "servers": rows}, indent=2))
        elif not rows:
            self.stdout.write("no MCP servers configured (mcp_servers: in agentkit.yaml)")
        for row in [] if options["json"] else rows:
            self.stdout.write(f"{row['name']} ({row['transport']}): {row['state']}")
            if row["server"]:
                self.stdout.write(f"  server: {row['server']}")
            if row["exposed_tools"]:
                self.stdout.write(f"  tools: {', '.join(row['exposed_tools'])}")
            if row["last_error"]:
                self.stdout.write(f"  last error: {row['last_error']}")
            check = row["check"]
            if check is not None:
                said = check.get("output") if check.get("ok") else check.get("error")
                state = "ok" if check.get("ok") else "failed"
                self.stdout.write(f"  check {check['tool']}: {state}: {str(said)[:300]}")
        if not healthy:
            sys.exit(1)
