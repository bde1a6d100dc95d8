"""An asyncio-native network backend for the gateway's httpx transport.

httpx's default backend goes through anyio, which reads a socket by registering it with the
event loop's selector, waiting, reading once and unregistering it again: two `epoll_ctl` system
calls and a future per read, on top of the `recv`. A model stream is read a chunk at a time (a
few dozen bytes every ~20 ms, per task): with 50 streams on the chat's serving loop that
re-registration was about a quarter of the loop's CPU (bench/streaming.py). Here each connection
is an asyncio `Protocol`: the transport stays registered and hands over whatever arrived;
`read()` returns buffered bytes at once and waits only on an empty buffer. TLS is asyncio's
own (`loop.start_tls`, the context the caller passes: the gateway's verifying one).

`AsyncioTransport` puts it under an httpx client (`httpx.AsyncClient(transport=...)`): everything
above the socket (HTTP/1.1, pooling, keep-alive, the httpx API) stays httpx's and httpcore's.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

READ_BUFFER_HIGH = 256 * 1024  # past this many unread bytes, stop reading the socket


def socket_readable(sock: socket.socket | None) -> bool:
    """Data or an end of stream waits on the socket (what httpcore asks an idle pooled
    connection before reusing it: readable means the server closed it or wrote out of turn).
    A socket that is gone counts as readable, so the pool drops the connection."""
    if sock is None or sock.fileno() == -1:
        return True
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class _Connection(asyncio.Protocol):
    """The socket's side: buffers what arrives, wakes the reader, applies flow control."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self.reading_paused = False
        self._reader: asyncio.Future | None = None
        self._writable: asyncio.Future | None = None  # set while the transport asks to wait
        self._deadline = 0.0  # the waiting read's timeout, on the loop's clock
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > READ_BUFFER_HIGH and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close the transport (a TLS transport ignores it and closes anyway)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.eof = True
        self.error = exc
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake()
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def _wake(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None and not reader.done():
            reader.set_result(None)

    async def wait_readable(self, timeout: float | None) -> None:
        """Until data, EOF or the read timeout. One timer per connection, re-armed only when it
        fires early: a timer per read (created, then cancelled ~20 ms later) is what a model
        stream would otherwise cost the loop's timer heap for every chunk."""
        loop = asyncio.get_running_loop()
        self._reader = waiter = loop.create_future()
        if timeout is not None:
            self._deadline = loop.time() + timeout
            if self._timer is None:
                self._timer = loop.call_at(self._deadline, self._check_deadline)
        try:
            await waiter
        finally:
            if self._reader is waiter:
                self._reader = None

    def _check_deadline(self) -> None:
        self._timer = None
        reader = self._reader
        if reader is None or reader.done():
            return  # nobody waits: the next wait arms it again
        loop = reader.get_loop()
        if loop.time() >= self._deadline:
            self._reader = None
            reader.set_exception(httpcore.ReadTimeout("timed out reading from the server"))
        else:  # the wait started after the timer was armed: its own deadline is later
            self._timer = loop.call_at(self._deadline, self._check_deadline)

    async def wait_writable(self, timeout: float | None) -> None:
        writable = self._writable
        if writable is None:
            return
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(writable)
        except TimeoutError:
            raise httpcore.WriteTimeout("timed out sending to the server") from None


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, connection: _Connection) -> None:
        self._transport = transport
        self._connection = connection

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        connection = self._connection
        while not connection.buffer:
            if connection.eof:
                if connection.error is not None:
                    raise httpcore.ReadError(str(connection.error)) from connection.error
                return b""
            await connection.wait_readable(timeout)
        buffer = connection.buffer
        if len(buffer) <= max_bytes:
            data = bytes(buffer)
            buffer.clear()
        else:
            data = bytes(buffer[:max_bytes])
            del buffer[:max_bytes]
        if connection.reading_paused and len(buffer) <= READ_BUFFER_HIGH // 2:
            connection.reading_paused = False
            self._transport.resume_reading()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        if self._connection.eof or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        await self._connection.wait_writable(timeout)

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            transport = await loop.start_tls(
                self._transport,
                self._connection,
                ssl_context,
                server_hostname=server_hostname,
                ssl_handshake_timeout=timeout,
            )
        except TimeoutError as exc:
            self._transport.close()
            raise httpcore.ConnectTimeout("timed out in the TLS handshake") from exc
        except (OSError, ssl.SSLError, ConnectionError) as exc:
            self._transport.close()
            raise httpcore.ConnectError(str(exc)) from exc
        if transport is None:  # the connection closed during the handshake
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        self._connection.transport = transport
        return AsyncioStream(transport, self._connection)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":  # an idle connection the server closed or wrote to
            connection = self._connection
            if connection.buffer or connection.eof or self._transport.is_closing():
                return True
            # what the loop has not read yet (a close that arrived since its last poll)
            return socket_readable(self._transport.get_extra_info("socket"))
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[tuple] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        try:
            async with asyncio.timeout(timeout):
                transport, connection = await loop.create_connection(
                    _Connection, host, port, local_addr=local
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"timed out connecting to {host}:{port}") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return _with_options(transport, connection, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[tuple] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, connection = await loop.create_unix_connection(_Connection, path)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"timed out connecting to {path}") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return _with_options(transport, connection, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _with_options(
    transport: asyncio.Transport, connection: _Connection, options: Iterable[tuple] | None
) -> AsyncioStream:
    sock: socket.socket | None = transport.get_extra_info("socket")
    for option in options or ():
        if sock is not None:
            sock.setsockopt(*option)
    return AsyncioStream(transport, connection)


# httpcore's errors as httpx's, most specific first (what httpx's own transport raises)
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def _as_httpx_errors():
    try:
        yield
    except Exception as exc:
        for theirs, ours in _ERRORS:
            if isinstance(exc, theirs):
                raise ours(str(exc)) from exc
        raise


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self.stream = stream

    async def __aiter__(self):
        with _as_httpx_errors():
            async for chunk in self.stream:
                yield chunk

    async def aclose(self) -> None:
        close = getattr(self.stream, "aclose", None)
        if close is not None:
            with _as_httpx_errors():
                await close()


class AsyncioTransport(httpx.AsyncBaseTransport):
    """An httpx transport: httpcore's HTTP/1.1 connection pool (limits, keep-alive) reading
    through `AsyncioBackend`, built with both libraries' public APIs. Proxies that httpx mounts
    from the environment keep httpx's own transport."""

    def __init__(self, *, ssl_context: ssl.SSLContext, limits: httpx.Limits | None = None):
        limits = limits or httpx.Limits(max_connections=100, max_keepalive_connections=20)
        self.backend = AsyncioBackend()
        self.pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=self.backend,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            response = await self.pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.pool.aclose()
