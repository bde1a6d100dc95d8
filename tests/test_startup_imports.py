"""What a process pays at start. Every `manage.py` command, RQ worker and Daphne process loads
Django, the URLconf and the run builder; the MCP SDK (~0.4 s of CPU to import, a quarter of a
command's start) is imported only where MCP servers are used, not by every process."""

from __future__ import annotations

from tests.support import python_probe, server_env

PROBE = """
import sys
import django
django.setup()
import agentkit_site.urls  # the admin (its MCP page), the API, the MCP endpoint
import apps.tasks.run.engine_build  # what every run is built with
import apps.tasks.worker  # the RQ worker's entry
from django.core.management import call_command
call_command("check", verbosity=0)
print(sorted(m for m in sys.modules if m == "mcp" or m.startswith("mcp.")))
"""


def test_a_process_without_mcp_servers_does_not_import_the_mcp_sdk(tmp_path):
    env = server_env(tmp_path, DJANGO_SETTINGS_MODULE="agentkit_site.settings")
    out = python_probe(PROBE, env)
    assert out.strip().splitlines()[-1] == "[]", out[-2000:]
