"""One MCP server's session in this process (runs on the background loop, background.py).

Opened lazily at the first `ensure()` and kept. A supervisor task holds the transport and the
`ClientSession` open (anyio contexts must be left by the task that entered them) until the
connection ends: the stdio server exits (its stdout reaches EOF), a call finds the connection
gone, or `close()`. A server that was serving is started again after a backoff (0.5 s doubling
to 30 s; back to 0.5 s after a minute of service), and tried again so for as long as it stays
down (a call that finds it down ends the backoff early); one that never got ready is `failed`
(its stderr tail in `last_error`) and tried again at an `ensure()` once its backoff has passed.

Errors a call raises: `ServerUnavailable` (not started, died, connection lost: the caller's
`mcp_server_unavailable`), `CallTimedOut` (past `call_timeout`: `tool_timeout`),
`RemoteError` (the server answered the request with a JSON-RPC error).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
from typing import Any

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mcp_types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from apps.engine.config import McpServerConfig
from apps.tools.mcp.eof import EofSignal

log = logging.getLogger(__name__)

STDERR_TAIL = 2000  # characters of a server's stderr kept for the report
FIRST_BACKOFF, MAX_BACKOFF, HEALTHY_AFTER = 0.5, 30.0, 60.0


class ServerUnavailable(Exception):
    pass


class CallTimedOut(Exception):
    pass


class RemoteError(Exception):
    pass


class ServerConnection:
    def __init__(self, name: str, config: McpServerConfig):
        self.name = name
        self.config = config
        self.state = "idle"  # idle | starting | ready | restarting | failed | closed
        self.tools: list[mcp_types.Tool] = []
        self.last_error = ""
        self.restarts = 0
        self.server_info = ""
        self._session: ClientSession | None = None
        self._supervisor: asyncio.Task | None = None
        self._settled = asyncio.Event()  # ready or failed: what ensure() waits for
        self._lost = asyncio.Event()  # this session is over (EOF, a lost call, close)
        self._stopping = False
        self._failed_at = 0.0
        self._backoff = FIRST_BACKOFF
        self._stderr: Any = None
        self._background: set[asyncio.Task] = set()
        self._poke = asyncio.Event()  # ends a backoff early
        self._retrying = False  # failed, served before: the supervisor retries with backoff

    # ── state for check_mcp and the admin page ─────────────────────────────────────────────
    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.config.transport,
            "state": self.state,
            "tools": sorted(tool.name for tool in self.tools),
            "last_error": self.last_error,
            "restarts": self.restarts,
            "server": self.server_info,
        }

    def stderr_tail(self) -> str:
        handle = self._stderr
        if handle is None or handle.closed:
            return ""
        try:
            size = os.fstat(handle.fileno()).st_size
            start = max(0, size - STDERR_TAIL * 2)
            raw = os.pread(handle.fileno(), size - start, start)
        except OSError:
            return ""
        return raw.decode("utf-8", "replace")[-STDERR_TAIL:].strip()

    # ── lifecycle ──────────────────────────────────────────────────────────────────────────
    async def ensure(self) -> bool:
        """Ready to call (starting it, or waiting for its restart, within startup_timeout)."""
        if self.state == "ready" and self._lost.is_set():
            self._session_lost(self._lost)  # seen before the supervisor got to it
        if self.state == "ready":
            return True
        if self._stopping:
            return False
        if self._supervisor is not None and not self._supervisor.done():
            if self.state == "failed":  # served before, retried with backoff; or stopping now
                if not self._retrying or time.monotonic() - self._failed_at < FIRST_BACKOFF:
                    return False
                self.state = "restarting"
                self._settled.clear()
            self._poke.set()  # try now rather than at the end of the backoff
        else:
            if self.state == "failed" and time.monotonic() - self._failed_at < self._backoff:
                return False
            self._settled.clear()
            self.state = "starting"
            self._supervisor = asyncio.get_running_loop().create_task(
                self._supervise(), name=f"mcp-{self.name}"
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), self.config.startup_timeout + 1)
        return self.state == "ready"

    def _start_failed(self, why: str) -> None:
        if self.state != "failed":
            self.last_error = self._with_stderr(why)
        self.state = "failed"
        self._failed_at = time.monotonic()
        self._settled.set()

    def _session_lost(self, lost: asyncio.Event) -> None:
        """The session `lost` belongs to is over: calls wait for the restart from now on."""
        lost.set()
        if lost is self._lost and self.state == "ready":
            self.state = "restarting"
            self._settled.clear()

    async def close(self) -> None:
        self._stopping = True
        self.state = "closed"
        self._lost.set()
        self._poke.set()
        if self._supervisor is not None and not self._supervisor.done():
            try:
                await asyncio.wait_for(self._supervisor, 10)
            except (TimeoutError, asyncio.CancelledError):
                self._supervisor.cancel()
            except Exception:
                log.debug("mcp %s: error while closing", self.name, exc_info=True)

    async def _supervise(self) -> None:
        served_before = False
        while not self._stopping:
            self._lost = asyncio.Event()
            began = time.monotonic()
            served = await self._serve_once()
            if self._stopping:
                break
            if not served:
                self._start_failed(self.last_error)
                log.warning("mcp server %s failed to start: %s", self.name, self.last_error)
                if not served_before:  # never served: a later ensure() tries, after the backoff
                    self._backoff = min(self._backoff * 2, MAX_BACKOFF)
                    return
                # It served before (it died, or its host went away): keep trying, with backoff;
                # a call meanwhile fails at once, or pokes an early try (ensure()).
                self._retrying = True
                await self._pause(self._backoff)
                self._retrying = False
                self._backoff = min(self._backoff * 2, MAX_BACKOFF)
                if not self._stopping:
                    self.state = "restarting"
                    self._settled.clear()
                continue
            served_before = True
            if time.monotonic() - began > HEALTHY_AFTER:
                self._backoff = FIRST_BACKOFF
            self.state = "restarting"
            self._settled.clear()
            self.restarts += 1
            log.warning(
                "mcp server %s stopped (%s); restarting in %.1f s",
                self.name,
                self.last_error or "connection closed",
                self._backoff,
            )
            await self._pause(self._backoff)
            self._backoff = min(self._backoff * 2, MAX_BACKOFF)
        self.state = "closed"
        self._settled.set()

    async def _pause(self, seconds: float) -> None:
        """The backoff; a call that finds the server down ends it early (ensure())."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._poke.wait(), seconds)
        self._poke.clear()

    async def _serve_once(self) -> bool:
        """One session, from start to its end. True when it got ready."""
        ready = False
        self._session = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(
                    ClientSession(
                        EofSignal(read, self._lost),
                        write,
                        message_handler=self._on_message,
                    )
                )
                try:
                    with anyio.fail_after(self.config.startup_timeout):
                        info = await session.initialize()
                        self.tools = await self._list_tools(session)
                except Exception as exc:  # said now; stopping the server may take seconds
                    why = _describe(exc)
                    if isinstance(exc, TimeoutError):
                        why = (
                            f"not ready within startup_timeout ({self.config.startup_timeout:g} s)"
                        )
                    self._start_failed(why)
                    raise ServerUnavailable(why) from None
                self.server_info = f"{info.server_info.name} {info.server_info.version}".strip()
                self._session = session
                self._poke.clear()
                self.state = "ready"
                self.last_error = ""
                ready = True
                self._settled.set()
                log.info("mcp server %s ready: %d tools", self.name, len(self.tools))
                await self._lost.wait()
                self._session_lost(self._lost)
                self._session = None
                if not self._stopping:
                    self.last_error = self._with_stderr("the server closed the connection")
        except Exception as exc:  # a failed start or a broken session: reported, never raised
            self.last_error = self._with_stderr(_describe(exc))  # with the whole stderr now
        finally:
            self._session = None
        return ready

    def _transport(self):
        cfg = self.config
        if cfg.transport == "stdio":
            self._close_stderr()
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 (kept open)
            env = {name: os.environ[name] for name in cfg.env if name in os.environ}
            missing = sorted(set(cfg.env) - set(env))
            if missing:
                log.warning("mcp server %s: environment variables not set: %s", self.name, missing)
            params = StdioServerParameters(
                command=cfg.command or "", args=list(cfg.args), env=env, cwd=cfg.cwd
            )
            return stdio_client(params, errlog=self._stderr)
        headers = {h: os.environ[v] for h, v in cfg.headers.items() if v in os.environ}
        missing = sorted(v for v in cfg.headers.values() if v not in os.environ)
        if missing:
            log.warning("mcp server %s: environment variables not set: %s", self.name, missing)
        client = httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(30.0, read=cfg.call_timeout + 30)
        )
        return _http_transport(cfg.url or "", client)

    def _close_stderr(self) -> None:
        if self._stderr is not None and not self._stderr.closed:
            self._stderr.close()

    def _with_stderr(self, message: str) -> str:
        tail = self.stderr_tail()
        return self._scrub(f"{message}; stderr: {tail}" if tail else message)

    def _scrub(self, text: str) -> str:
        """The values of the variables the server gets (`env`, `headers`) never leave it."""
        for name in [*self.config.env, *self.config.headers.values()]:
            value = os.environ.get(name, "")
            if len(value) >= 6:
                text = text.replace(value, f"[{name}]")
        return text

    async def _list_tools(self, session: ClientSession) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor = None
        for _ in range(100):  # a server that pages forever is cut off
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await session.list_tools(params=params)
            tools.extend(result.tools)
            cursor = result.next_cursor
            if not cursor:
                break
        return tools

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            session = self._session
            if session is not None:
                task = asyncio.get_running_loop().create_task(self._relist(session))
                self._background.add(task)  # held until done (the loop keeps weak references)
                task.add_done_callback(self._background.discard)
        elif isinstance(message, Exception):
            log.info("mcp server %s: transport error: %s", self.name, _describe(message))

    async def _relist(self, session: ClientSession) -> None:
        try:
            with anyio.fail_after(self.config.startup_timeout):
                self.tools = await self._list_tools(session)
            log.info("mcp server %s: tools changed: %d tools", self.name, len(self.tools))
        except Exception as exc:
            log.warning("mcp server %s: tools/list failed: %s", self.name, _describe(exc))

    # ── calls ──────────────────────────────────────────────────────────────────────────────
    async def call(self, tool: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        if not await self.ensure() or self._session is None:
            raise ServerUnavailable(self.last_error or f"the server is {self.state}")
        session, lost = self._session, self._lost
        timeout = self.config.call_timeout
        request = asyncio.ensure_future(
            session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        )
        ended = asyncio.ensure_future(lost.wait())
        try:
            done, _ = await asyncio.wait(
                {request, ended}, timeout=timeout, return_when="FIRST_COMPLETED"
            )
        finally:
            ended.cancel()
            if not request.done():
                request.cancel()  # past the timeout, the connection lost, or our caller cancelled
        if request in done:
            try:
                return request.result()
            except MCPError as exc:
                if exc.code == mcp_types.REQUEST_TIMEOUT:
                    raise CallTimedOut(f"no answer within call_timeout ({timeout:g} s)") from None
                if exc.code == mcp_types.CONNECTION_CLOSED:
                    self._session_lost(lost)
                    raise ServerUnavailable(self._with_stderr("the connection closed")) from None
                raise RemoteError(exc.error.message) from None
            except (TimeoutError, ValueError, RuntimeError) as exc:
                raise RemoteError(_describe(exc)) from None
            except Exception as exc:  # the transport broke under the call
                self._session_lost(lost)
                raise ServerUnavailable(self._with_stderr(_describe(exc))) from None
        if ended in done:
            self._session_lost(lost)
            raise ServerUnavailable(self._with_stderr("the server stopped during the call"))
        raise CallTimedOut(f"no answer within call_timeout ({timeout:g} s)")


@contextlib.asynccontextmanager
async def _http_transport(url: str, client: httpx2.AsyncClient):
    async with client, streamable_http_client(url, http_client=client) as (read, write):
        yield read, write


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    if isinstance(exc, MCPError):
        return exc.error.message
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
