"""A transport's read stream, passed through, that tells when it ends (connection.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio


class EofSignal:
    """The transport's read stream, passed through, telling `eof` when it ends: how a stdio
    server's exit (EOF on its stdout) is seen while no call is in flight."""

    def __init__(self, stream: Any, eof: asyncio.Event):
        self._stream = stream
        self._eof = eof

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def __aenter__(self) -> EofSignal:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        self._eof.set()
        return await self._stream.__aexit__(*exc)

    def __aiter__(self) -> EofSignal:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError, anyio.EndOfStream):
            self._eof.set()
            raise

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except (anyio.ClosedResourceError, anyio.EndOfStream):
            self._eof.set()
            raise
