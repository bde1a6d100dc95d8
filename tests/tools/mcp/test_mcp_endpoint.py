"""agentkit as an MCP server: the official MCP SDK client, as another agent would, against a real
agentkit (Daphne, tests/support.py) at /mcp: it lists the tools, runs a task to completion with
progress notifications, reads its result, and is refused without a token and for another user's
task. The task is a normal Task: the JSON API lists it like any other."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.support import agentkit_server

pytestmark = pytest.mark.slow

NEW_USER = (
    "from django.contrib.auth import get_user_model; "
    "get_user_model().objects.create_user('mallory', password='pw-123-secret')"
)


@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str | None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def token_for(server, user: str) -> str:
    return server.manage("create_api_token", user).stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with agentkit_server(tmp_path_factory.mktemp("mcp-endpoint")) as running:
        running.manage("shell", "-c", NEW_USER)
        yield running


async def test_an_mcp_client_lists_tools_runs_a_task_and_reads_its_result(server):
    token = token_for(server, server.username)
    progress: list[str] = []

    async def on_progress(done, total, message):
        progress.append(message or "")

    async with mcp_session(server.url, token) as session:
        names = sorted(t.name for t in (await session.list_tools()).tools)
        assert names == ["list_workspaces", "review_spec", "run_task", "task_result", "task_status"]
        listed = await session.call_tool("list_workspaces", {})
        workspaces = listed.structured_content["workspaces"]
        assert "demo" in [w["name"] for w in workspaces]
        ran = await session.call_tool(
            "run_task",
            {
                "workspace": "demo",
                "text": "fix the failing test in tests/test_slug.py",
                "mode": "react",
            },
            progress_callback=on_progress,
        )
        assert not ran.is_error, ran.content
        done = ran.structured_content
        assert done["status"] == "completed" and done["outcome"]
        assert "textkit/slug.py" in [c["path"] for c in done["changes"]]
        assert progress and all(m.startswith(f"task {done['id']} ") for m in progress)
        result = (await session.call_tool("task_result", {"id": done["id"]})).structured_content
        assert result["answer"] and result["status"] == "completed"
        status = (await session.call_tool("task_status", {"id": done["id"]})).structured_content
        assert status["status"] == "completed"

    # a normal task: the JSON API (what the chat reads) has it, in its conversation
    api = httpx.get(
        f"{server.url}/api/tasks/{done['id']}", headers={"Authorization": f"Bearer {token}"}
    ).json()
    assert api["status"] == "completed" and api["conversation"] == done["conversation"]

    other = token_for(server, "mallory")
    async with mcp_session(server.url, other) as session:
        refused = await session.call_tool("task_result", {"id": done["id"]})
        assert refused.is_error and "not found" in refused.content[0].text
        listed = await session.call_tool("list_workspaces", {})
        assert listed.structured_content["workspaces"] == []


async def test_no_token_or_a_bad_one_is_refused(server):
    for token in (None, "ak_not-a-real-token"):
        response = httpx.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {token}"} if token else {},
        )
        assert response.status_code == 401
        with pytest.raises(Exception):  # noqa: B017 (the SDK's error type for a 401 varies)
            async with mcp_session(server.url, token):
                pass


async def test_a_spec_awaiting_review_is_returned_with_its_id_and_review_spec_decides_it(server):
    token = token_for(server, server.username)
    async with mcp_session(server.url, token) as session:
        ran = await session.call_tool(
            "run_task",
            {
                "workspace": "demo",
                "text": "fix the failing test in tests/test_slug.py",
                "mode": "plan_exec",
            },
        )
        assert not ran.is_error, ran.content
        waiting = ran.structured_content
        assert waiting["status"] == "awaiting_review", waiting
        spec_id = waiting["spec"]["id"]
        reviewed = await session.call_tool("review_spec", {"id": spec_id, "decision": "confirm"})
        assert not reviewed.is_error, reviewed.content
        assert reviewed.structured_content["id"] == waiting["id"]
        assert reviewed.structured_content["status"] not in ("awaiting_review", "running", "queued")


async def test_agentkit_reaches_an_http_server_with_a_header_from_the_environment(
    server, monkeypatch
):
    """agentkit's own MCP client, pointed at agentkit's /mcp: `headers` takes the value of the
    named environment variable; without it the server refuses and the start fails, said so."""
    from apps.engine.config import McpServerConfig
    from apps.engine.tools import ToolSet
    from apps.tools.mcp.manager import McpManager

    config = McpServerConfig(
        transport="streamable_http",
        url=f"{server.url}/mcp",
        headers={"Authorization": "AGENTKIT_TEST_MCP_AUTH"},
        startup_timeout=20,
    )
    monkeypatch.delenv("AGENTKIT_TEST_MCP_AUTH", raising=False)
    refused = McpManager({"self": config})
    try:
        down = await asyncio.to_thread(refused.prepare)
        assert down.get("self"), down  # refused (401): its tools are absent
    finally:
        await asyncio.to_thread(refused.close)

    monkeypatch.setenv("AGENTKIT_TEST_MCP_AUTH", f"Bearer {token_for(server, server.username)}")
    manager = McpManager({"self": config})
    try:
        assert await asyncio.to_thread(manager.prepare) == {}
        tools = ToolSet(manager.tools())
        assert "self__list_workspaces" in tools.names()
        listed = await tools.safe_execute("self__list_workspaces", {})
        assert listed.ok and "demo" in listed.output, listed
    finally:
        await asyncio.to_thread(manager.close)
