"""Database connections of the threads that serve an event loop's `sync_to_async` calls.

Django opens one connection per thread and recycles it only around HTTP requests (the
`request_started` / `request_finished` signals). The threads of a loop's default executor — where
runs, sockets and the reaper do their database work — serve no request, so without this their
connections were never recycled: one the server had closed (a PostgreSQL restart, a failover, an
idle timeout) failed every later query of that thread. `RecyclingExecutor` runs Django's
`close_old_connections()` in a thread before a job when the thread's last check is older than
CHECK_SECONDS: connections past `CONN_MAX_AGE`, or unusable after an error, are closed and
reopened by the next query (with `CONN_HEALTH_CHECKS`, checked before reuse).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import close_old_connections

CHECK_SECONDS = 10.0

_local = threading.local()


def _recycled(fn, every: float):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        now = time.monotonic()
        if now - getattr(_local, "checked", float("-inf")) >= every:
            _local.checked = now
            close_old_connections()
        return fn(*args, **kwargs)

    return run


class RecyclingExecutor(ThreadPoolExecutor):
    """A ThreadPoolExecutor whose threads recycle their database connections (see above), at
    most every `check_seconds` per thread."""

    def __init__(self, *args, check_seconds: float = CHECK_SECONDS, **kwargs):
        super().__init__(*args, **kwargs)
        self.check_seconds = check_seconds

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(_recycled(fn, self.check_seconds), *args, **kwargs)


def install(loop: asyncio.AbstractEventLoop | None = None, *, max_workers: int | None = None):
    """Make a RecyclingExecutor the loop's default executor; returns it."""
    executor = RecyclingExecutor(max_workers=max_workers, thread_name_prefix="agentkit-db")
    (loop or asyncio.get_running_loop()).set_default_executor(executor)
    return executor
