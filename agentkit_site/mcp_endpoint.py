"""`/mcp`: agentkit as an MCP server over streamable HTTP (the tools: apps/tasks/doors/mcp_server.py),
beside Django in the ASGI router (asgi.py). A request without a valid `Authorization: Bearer
<API token>` is refused here with 401 before the MCP SDK sees it; each tool checks the token
again for its user. The SDK's session manager needs a running task group: it is started on the
serving loop at the first request and lives as long as the process (Daphne sends no ASGI
lifespan events)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from asgiref.sync import sync_to_async
from mcp.server.transport_security import TransportSecuritySettings

PATH = "/mcp"

log = logging.getLogger(__name__)


def _is_mcp(scope: dict[str, Any]) -> bool:
    path = scope.get("path", "")
    return scope["type"] == "http" and (path == PATH or path.startswith(PATH + "/"))


async def _refuse(send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="agentkit"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _token_user(header: str):
    from apps.tasks.services import api_token_authenticate

    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return api_token_authenticate(key=key.strip())


class McpEndpoint:
    """ASGI: `/mcp` to the MCP server, everything else to `app`."""

    def __init__(self, app):
        self.app = app
        self._mcp = None
        self._runner: asyncio.Task | None = None
        self._started: asyncio.Event | None = None

    async def __call__(self, scope, receive, send):
        if not _is_mcp(scope):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        header = headers.get(b"authorization", b"").decode("latin-1")
        if not header:
            return await _refuse(
                send, 401, "not_authenticated", "send 'Authorization: Bearer <token>'"
            )
        user = await sync_to_async(_token_user, thread_sensitive=False)(header)
        if user is None:
            return await _refuse(
                send,
                401,
                "invalid_token",
                "the token is unknown or revoked; create one with 'manage.py create_api_token USER'",
            )
        app = await self._serving()
        if app is None:
            return await _refuse(
                send, 503, "mcp_unavailable", "the MCP server could not start; see the server log"
            )
        return await app(scope, receive, send)

    async def _serving(self):
        if self._mcp is None:
            from apps.tasks.doors.mcp_server import server

            self._mcp = server.streamable_http_app(
                streamable_http_path=PATH,
                # No session state between requests: any web process of `make cluster` can
                # answer any request; run_task's progress travels in its own response stream.
                stateless_http=True,
                transport_security=TransportSecuritySettings(
                    enable_dns_rebinding_protection=False  # a bearer token is required instead
                ),
            )
            self._started = asyncio.Event()
            self._runner = asyncio.get_running_loop().create_task(
                self._run(server.session_manager), name="mcp-session-manager"
            )
        assert self._started is not None and self._runner is not None
        await self._started.wait()
        return None if self._runner.done() else self._mcp

    async def _run(self, manager) -> None:
        assert self._started is not None
        try:
            async with manager.run():
                self._started.set()
                await asyncio.Event().wait()  # for the life of the process
        except Exception:
            log.exception("the MCP session manager stopped")
        finally:
            self._started.set()  # a request waiting for the start gets its 503
