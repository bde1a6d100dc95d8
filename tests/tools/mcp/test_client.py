"""MCP servers as tool sources, with real servers started by the tests (conftest.py): tools
listed as `<server>__<tool>`, results mapped, arguments refused by schema before the call, a
server that exits at start reported with its stderr, a killed server restarted, call_timeout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time

import pytest

from apps.engine.tools import ToolSet
from apps.tools.mcp.names import MAX_NAME, exposed_name
from tests.tools.mcp.conftest import git_server, sdk_server, time_server

pytestmark = pytest.mark.slow  # spawns processes: started early (tests/conftest.py)


async def test_time_server_tools_are_listed_and_called_with_structured_results(servers):
    _, tools, down = servers(time=time_server())
    assert down == {}
    assert tools.names() == ["time__convert_time", "time__get_current_time"]
    spec = next(s for s in tools.specs() if s.name == "time__get_current_time")
    assert spec.input_schema["required"] == ["timezone"]
    assert spec.description.startswith("[MCP server time] ")
    result = await tools.safe_execute("time__get_current_time", {"timezone": "UTC"})
    assert result.ok, result
    assert json.loads(result.output)["timezone"] == "UTC"
    assert result.data["mcp_server"] == "time" and result.data["structured"]["timezone"] == "UTC"


async def test_git_server_over_stdio_reports_the_repository(servers, git_repo):
    _, tools, down = servers(git=git_server(git_repo))
    assert down == {}
    assert "git__git_status" in tools.names()
    result = await tools.safe_execute("git__git_status", {"repo_path": str(git_repo)})
    assert result.ok, result
    assert "new.txt" in result.output


async def test_a_bad_argument_is_refused_by_the_schema_before_the_call(servers):
    _, tools, _ = servers(t=sdk_server())
    refused = await tools.safe_execute("t__echo", {"text": 3})
    assert not refused.ok and refused.error_code == "tool_call_invalid"
    missing = await tools.safe_execute("t__echo", {"txt": "hi"})
    assert not missing.ok and missing.error_code == "schema_mismatch"
    assert (await tools.safe_execute("t__echo_calls", {})).output == "0"  # never reached it
    assert (await tools.safe_execute("t__echo", {"text": "hi"})).output == "echo: hi"
    assert (await tools.safe_execute("t__echo_calls", {})).output == "1"


async def test_an_error_result_is_a_typed_tool_error(servers):
    _, tools, _ = servers(t=sdk_server())
    result = await tools.safe_execute("t__fail", {"reason": "no such ticket"})
    assert not result.ok and result.error_code == "mcp_tool_error"
    assert "no such ticket" in result.error


async def test_a_server_that_exits_at_start_is_reported_with_its_stderr(servers):
    broken = {
        "command": sys.executable,
        "args": [
            "-c",
            "import sys; sys.stderr.write('fatal: no API key configured\\n'); sys.exit(2)",
        ],
        "startup_timeout": 10,
    }
    started = time.monotonic()
    manager, tools, down = servers(broken=broken, time=time_server())
    assert time.monotonic() - started < 10
    assert "fatal: no API key configured" in down["broken"]
    assert tools.names() == ["time__convert_time", "time__get_current_time"]
    state = {row["name"]: row for row in manager.status()}
    assert state["broken"]["state"] == "failed" and "no API key" in state["broken"]["last_error"]
    assert state["time"]["state"] == "ready"


async def test_a_server_that_never_answers_is_given_up_after_startup_timeout(servers):
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}
    started = time.monotonic()
    _, tools, down = servers(silent={**silent, "startup_timeout": 1})
    assert time.monotonic() - started < 8
    assert "startup_timeout" in down["silent"] and len(tools) == 0


async def test_a_server_killed_mid_call_fails_typed_and_the_next_call_works(servers):
    _, tools, _ = servers(t=sdk_server(call_timeout=20))
    pid = int((await tools.safe_execute("t__pid", {})).output)
    call = asyncio.create_task(tools.safe_execute("t__sleep", {"seconds": 15}))
    await asyncio.sleep(1.0)
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    result = await asyncio.wait_for(call, 20)
    assert time.monotonic() - started < 5
    assert not result.ok and result.error_code == "mcp_server_unavailable", result
    again = await tools.safe_execute("t__pid", {})
    assert again.ok, again
    assert int(again.output) != pid


async def test_a_call_past_call_timeout_is_cancelled_as_tool_timeout(servers):
    _, tools, _ = servers(t=sdk_server(call_timeout=1))
    started = time.monotonic()
    result = await tools.safe_execute("t__sleep", {"seconds": 30})
    assert time.monotonic() - started < 5
    assert not result.ok and result.error_code == "tool_timeout", result
    assert (await tools.safe_execute("t__echo", {"text": "still here"})).ok


async def test_cancelling_the_caller_cancels_the_call(servers):
    _, tools, _ = servers(t=sdk_server(call_timeout=30))
    call = asyncio.create_task(tools.safe_execute("t__sleep", {"seconds": 20}))
    await asyncio.sleep(0.5)
    call.cancel()
    started = time.monotonic()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    assert time.monotonic() - started < 2
    assert (await tools.safe_execute("t__echo", {"text": "next"})).output == "echo: next"


async def test_the_allow_list_keeps_only_the_named_tools(servers):
    _, tools, _ = servers(t=sdk_server(tools=["echo*"]))
    assert tools.names() == ["t__echo", "t__echo_calls"]


async def test_a_streamable_http_server_gives_its_tools(servers, http_server):
    _, tools, down = servers(web={"transport": "streamable_http", "url": http_server})
    assert down == {}
    assert "web__echo" in tools.names()
    assert (
        await tools.safe_execute("web__echo", {"text": "over http"})
    ).output == "echo: over http"


def test_exposed_names_fit_the_providers_limits():
    assert exposed_name("git", "git_status") == "git__git_status"
    long = exposed_name("tracker", "x" * 100)
    odd = exposed_name("tracker", "search.issues/v2")
    assert len(long) <= MAX_NAME and len(odd) <= MAX_NAME
    assert all(c.isalnum() or c in "_-" for c in long + odd)
    assert exposed_name("tracker", "a.b") != exposed_name("tracker", "a/b")


async def test_a_secret_the_server_prints_never_reaches_the_report(servers, monkeypatch):
    monkeypatch.setenv("TRACKER_TOKEN", "tt-very-secret-value")
    leaky = {
        "command": sys.executable,
        "args": [
            "-c",
            "import os, sys; sys.stderr.write('bad token ' + os.environ['TRACKER_TOKEN']); sys.exit(1)",
        ],
        "env": ["TRACKER_TOKEN"],
        "startup_timeout": 10,
    }
    manager, _, down = servers(leaky=leaky)
    assert "bad token [TRACKER_TOKEN]" in down["leaky"]
    assert "tt-very-secret-value" not in json.dumps(manager.status())


async def test_tools_listed_again_on_tools_list_changed(servers):
    manager, tools, _ = servers(t=sdk_server())
    assert "t__extra" not in tools.names()
    assert (await tools.safe_execute("t__add_tool", {"name": "extra"})).ok
    for _ in range(100):
        if "t__extra" in [tool.name for tool in manager.tools()]:
            break
        await asyncio.sleep(0.05)
    again = ToolSet(manager.tools())
    assert (await again.safe_execute("t__extra", {"text": "hi"})).output == "extra: hi"


def _npx_everything() -> list[str] | None:
    """`npx` running @modelcontextprotocol/server-everything from the npm cache, or None."""
    import shutil
    import subprocess

    npx = shutil.which("npx")
    if npx is None:
        return None
    command = [npx, "--offline", "-y", "@modelcontextprotocol/server-everything"]
    try:
        probe = subprocess.run(
            [*command, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None
    return None if "ENOTCACHED" in probe.stderr or "E404" in probe.stderr else command


async def test_the_reference_everything_server_over_npx(servers):
    command = _npx_everything()
    if command is None:
        pytest.skip(
            "@modelcontextprotocol/server-everything is not runnable offline here (no npx, or "
            "the package is not in the npm cache); the SDK's own server covers streamable HTTP"
        )
    _, tools, down = servers(
        everything={"command": command[0], "args": command[1:], "startup_timeout": 60}
    )
    assert down == {}
    result = await tools.safe_execute("everything__echo", {"message": "hello"})
    assert result.ok and "hello" in result.output


async def test_an_http_server_that_goes_away_mid_call_fails_typed_and_is_reached_again(servers):
    import subprocess

    from tests.support import free_port, wait_for_port
    from tests.tools.mcp.conftest import SDK_SERVER

    port = free_port()

    def serve():
        proc = subprocess.Popen(
            [sys.executable, str(SDK_SERVER), "http", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(port, timeout=30, process=proc)
        return proc

    proc = serve()
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        _, tools, down = servers(
            web={"transport": "streamable_http", "url": url, "call_timeout": 20}
        )
        assert down == {}
        call = asyncio.create_task(tools.safe_execute("web__sleep", {"seconds": 15}))
        await asyncio.sleep(1.0)
        started = time.monotonic()
        proc.kill()
        proc.wait()
        result = await asyncio.wait_for(call, 20)
        assert time.monotonic() - started < 5
        assert not result.ok and result.error_code == "mcp_server_unavailable", result
        proc = await asyncio.to_thread(serve)
        await asyncio.sleep(0.6)
        again = await tools.safe_execute("web__echo", {"text": "back"})
        assert again.ok and again.output == "echo: back", again
    finally:
        proc.kill()
        proc.wait()
