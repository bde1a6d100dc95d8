"""The event loop the MCP sessions of this process live on: one daemon thread, started at the
first use. The MCP SDK is anyio-based and a session's streams belong to the loop that opened
them, so every run (on Daphne's loop, an RQ worker's, a test's) reaches its servers through this
one loop, with bounded waits: `call(coro, timeout)` from a coroutine, `call_sync` from a thread.
Cancelling the awaiting coroutine cancels the work on the background loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid = 0  # a forked child (an RQ work horse) inherits no thread: it starts its own loop


def loop() -> asyncio.AbstractEventLoop:
    global _loop, _pid
    with _lock:
        if _loop is None or _loop.is_closed() or _pid != os.getpid():
            new = asyncio.new_event_loop()
            thread = threading.Thread(target=new.run_forever, name="agentkit-mcp", daemon=True)
            thread.start()
            _loop, _pid = new, os.getpid()
        return _loop


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    return asyncio.run_coroutine_threadsafe(coro, loop())


async def call(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Run `coro` on the background loop; at most `timeout` seconds (TimeoutError). A cancel
    of the caller cancels it there too."""
    future = asyncio.wrap_future(submit(coro))
    return await asyncio.wait_for(future, timeout)


def call_sync(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """From a thread that is not the background loop's: wait at most `timeout` seconds."""
    future = submit(coro)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"no answer within {timeout:g} s") from None
