"""Stopping a run from outside: the caller's `CancellationToken`, the engine's `Interrupter`.

A run spends its time waiting on something slow: the model's next chunk, a tool, the verifier. The
engine awaits each of those through `Interrupter.guard`, so a cancel (or the wall-time limit)
cancels exactly that wait, at once, and the wait raises the exception the engine asked for. No
task is spawned per wait: the interrupter cancels the task that is waiting and takes that
cancellation back (`Task.uncancel`) once it has turned into the engine's exception, so any other
cancellation of the same task still propagates untouched. Between waits, `check()` raises it.
"""

from __future__ import annotations

import asyncio
import threading
from asyncio import current_task
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class CancellationToken:
    """Cancels a run. `cancel()` may be called from any thread, before or during the run."""

    def __init__(self) -> None:
        self._reason: str | None = None
        self._listeners: list[Callable[[str], None]] = []
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str = "cancelled by the user") -> None:
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason
            listeners = list(self._listeners)
        for listener in listeners:
            listener(reason)

    def subscribe(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call `listener(reason)` on cancel (at once if already cancelled); returns unsubscribe."""
        with self._lock:
            reason = self._reason
            if reason is None:
                self._listeners.append(listener)
        if reason is not None:
            listener(reason)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe


def _discard(awaitable: Awaitable[object]) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


class Interrupter:
    """One per run, created inside the running event loop."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._cause: Callable[[], BaseException] | None = None
        self._waiting: asyncio.Task | None = None  # the task inside guard(), if any
        self._cancelled_task: asyncio.Task | None = None  # the task we called cancel() on

    @property
    def interrupted(self) -> bool:
        return self._cause is not None

    def interrupt(self, cause: Callable[[], BaseException]) -> None:
        """From now on, guarded waits and check() raise `cause()`. The first cause wins."""
        if threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self.interrupt, cause)
            return
        if self._cause is None:
            self._cause = cause
        task = self._waiting
        if task is not None and self._cancelled_task is None and task is not current_task():
            self._cancelled_task = task
            task.cancel()

    def check(self) -> None:
        if self._cause is not None:
            raise self._cause()

    async def guard(self, awaitable: Awaitable[T]) -> T:
        if self._cause is not None:
            _discard(awaitable)
            raise self._cause()
        task = current_task(self._loop)
        self._waiting = task
        try:
            result = await awaitable
        except asyncio.CancelledError:
            if self._took_back(task):
                raise self._cause() from None  # type: ignore[misc]
            raise
        finally:
            self._waiting = None
        # the awaitable swallowed our cancellation (checked inline: this runs on every wait)
        if self._cancelled_task is task and self._took_back(task):
            raise self._cause()  # type: ignore[misc]
        return result

    def _took_back(self, task: asyncio.Task | None) -> bool:
        """True when the pending cancellation of `task` was ours alone, now withdrawn."""
        if task is None or self._cancelled_task is not task:
            return False
        self._cancelled_task = None
        return task.uncancel() == 0
