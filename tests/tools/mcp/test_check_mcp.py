"""`manage.py check_mcp [--json]` and the admin's MCP page, with real servers: states, tools,
the configured check call, and a failed start with its stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from apps.tasks.conf import reload_agent_config
from apps.tools.mcp.manager import shutdown
from tests.support import ROOT, VENV_BIN

BROKEN = "import sys; sys.stderr.write('fatal: DB_URL is not set\\n'); sys.exit(1)"


def write_config(tmp_path, broken: bool = True):
    text = f"""
        mcp_servers:
          time:
            command: {VENV_BIN / "mcp-server-time"}
            args: ["--local-timezone", "UTC"]
            check: {{tool: get_current_time, arguments: {{timezone: UTC}}}}
        """
    if broken:
        text += f"""
          db:
            command: {sys.executable}
            args: ["-c", "{BROKEN}"]
            startup_timeout: 10
        """
    path = tmp_path / "agentkit.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def check_mcp(config, *args):
    env = {**os.environ, "AGENTKIT_CONFIG": str(config)}
    return subprocess.run(
        [sys.executable, "manage.py", "check_mcp", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_mcp_json_lists_servers_states_tools_and_the_check_call(tmp_path):
    done = check_mcp(write_config(tmp_path), "--json")
    assert done.returncode == 1, done.stderr  # one server is down
    servers = {row["name"]: row for row in json.loads(done.stdout)["servers"]}
    time_row, db = servers["time"], servers["db"]
    assert time_row["state"] == "ready"
    assert time_row["exposed_tools"] == ["time__convert_time", "time__get_current_time"]
    assert time_row["check"]["ok"] and '"timezone": "UTC"' in time_row["check"]["output"]
    assert db["state"] == "failed" and "fatal: DB_URL is not set" in db["last_error"]


def test_check_mcp_text_and_exit_zero_when_all_are_up(tmp_path):
    done = check_mcp(write_config(tmp_path, broken=False))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "time (stdio): ready" in done.stdout
    assert "check get_current_time: ok" in done.stdout


@pytest.mark.django_db
def test_the_admin_mcp_page_shows_servers_and_starts_them_on_request(
    admin_client, settings, tmp_path
):
    settings.AGENTKIT_CONFIG = str(write_config(tmp_path))
    reload_agent_config()
    try:
        page = admin_client.get("/admin/mcp/")
        assert page.status_code == 200
        body = page.content.decode()
        assert 'data-server="time"' in body and 'data-server="db"' in body
        checked = admin_client.post("/admin/mcp/").content.decode()
        assert "time__get_current_time" in checked
        assert "fatal: DB_URL is not set" in checked
        assert "get_current_time: ok" in checked
    finally:
        shutdown()
        settings.AGENTKIT_CONFIG = str(ROOT / "agentkit.yaml")
        reload_agent_config()


def test_the_admin_mcp_page_is_for_staff_only(client):
    assert client.get("/admin/mcp/").status_code == 302
