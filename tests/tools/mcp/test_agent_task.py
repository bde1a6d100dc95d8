"""An agent task (runner.run_task, the scripted model) with tools from MCP servers: the model
calls `time__get_current_time` and its next turn depends on the result; a server that exits at
start is named with its stderr in the run's facts and the task still completes."""

from __future__ import annotations

import shutil
import sys
import textwrap

import pytest
from asgiref.sync import sync_to_async

from apps.tasks.conf import agent_config, reload_agent_config
from apps.tasks.models import Task, TaskEvent
from apps.tasks.run.engine_build import prepare_agent_task
from apps.tasks.run.runner import run_task
from apps.tools.mcp.manager import shutdown
from tests.support import ROOT, VENV_BIN
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db(transaction=True)

BROKEN = "import sys; sys.stderr.write('fatal: TRACKER_TOKEN is not set\\n'); sys.exit(1)"


@pytest.fixture
def setup(settings, tmp_path):
    root = tmp_path / "demo"
    shutil.copytree(ROOT / "demo" / "workspace", root)
    user = make_user("alice")
    workspace = make_workspace("demo", root, user)
    script = tmp_path / "script.yaml"
    script.write_text(
        textwrap.dedent(
            """
            - text: "Let me ask the clock."
              tool_calls: [{name: time__get_current_time, arguments: {timezone: UTC}}]
            - text: "It is a day of the week in UTC, says the time server."
              after_tool: time__get_current_time
              match: '"timezone": "UTC"[\\s\\S]*"day_of_week"|"day_of_week"[\\s\\S]*"timezone": "UTC"'
            """
        )
    )
    config = tmp_path / "agentkit.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            models: {{main: {{provider: scripted, script: {script}}}}}
            sandbox: {{mode: "off"}}
            mcp_servers:
              time:
                command: {VENV_BIN / "mcp-server-time"}
                args: ["--local-timezone", "UTC"]
              tracker:
                command: {sys.executable}
                args: ["-c", "{BROKEN}"]
                startup_timeout: 10
            """
        )
    )
    settings.AGENTKIT_CONFIG = str(config)
    reload_agent_config()
    yield user, workspace
    shutdown()
    settings.AGENTKIT_CONFIG = str(ROOT / "agentkit.yaml")
    reload_agent_config()


async def test_an_agent_task_calls_an_mcp_tool_and_uses_its_result(setup):
    user, workspace = setup
    task = await sync_to_async(make_task)(user, workspace, goal="what day is it in UTC?")
    assert await run_task(task.pk) == "completed"
    events = await sync_to_async(
        lambda: list(TaskEvent.objects.filter(task=task).order_by("seq"))
    )()
    started = events[0].data
    assert "time__get_current_time" in started["tools"]
    assert not any(name.startswith("tracker__") for name in started["tools"])
    results = [e.data for e in events if e.type == "tool_result"]
    assert results[0]["name"] == "time__get_current_time" and results[0]["ok"]
    assert results[0]["data"]["mcp_server"] == "time"
    task = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert "says the time server" in task.result


async def test_cancelling_a_task_cancels_its_mcp_call(settings, tmp_path, setup):
    import asyncio
    import time

    from apps.tasks.services import task_request_cancel
    from tests.tools.mcp.conftest import SDK_SERVER

    user, workspace = setup
    script = tmp_path / "slow.yaml"
    script.write_text(
        '- text: "Waiting on the server."\n'
        "  tool_calls: [{name: t__sleep, arguments: {seconds: 60}}]\n"
        '- "done"\n'
    )
    config = tmp_path / "slow-agentkit.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            models: {{main: {{provider: scripted, script: {script}}}}}
            sandbox: {{mode: "off"}}
            mcp_servers:
              t: {{command: {sys.executable}, args: ["{SDK_SERVER}", "stdio"], call_timeout: 120}}
            """
        )
    )
    settings.AGENTKIT_CONFIG = str(config)
    reload_agent_config()
    task = await sync_to_async(make_task)(user, workspace, goal="wait for the server")
    runner = asyncio.create_task(run_task(task.pk))
    for _ in range(400):
        if await sync_to_async(TaskEvent.objects.filter(task=task, type="tool_call").exists)():
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    started = time.monotonic()
    assert await sync_to_async(task_request_cancel)(task=task)
    assert await asyncio.wait_for(runner, timeout=20) == "cancelled"
    assert time.monotonic() - started < 5


async def test_a_server_that_fails_to_start_is_named_with_its_stderr_and_the_task_runs(setup):
    user, workspace = setup
    task = await sync_to_async(make_task)(user, workspace, goal="what day is it in UTC?")
    agent_task = await sync_to_async(prepare_agent_task)(task, agent_config())
    said = agent_task.facts["mcp_servers_unavailable"]
    assert "tracker" in said and "fatal: TRACKER_TOKEN is not set" in said
    assert "time (" not in said
    assert await run_task(task.pk) == "completed"
