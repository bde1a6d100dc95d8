"""Batching of streamed text into `token` events (`streaming.flush_interval_ms`).

Every chunk is an event when the interval is 0. Otherwise the first chunk goes out at once, later
chunks are held until at least one interval has passed since the last flush (checked on
`time.monotonic()` whenever a chunk arrives), and `flush()` hands out the rest when the stream
ends. Nothing is reordered or dropped: the flushed pieces concatenate to the chunks pushed.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class DeltaBatcher:
    __slots__ = ("_clock", "_interval", "_last_flush", "_pending")

    def __init__(self, interval_ms: int, *, clock: Callable[[], float] = time.monotonic):
        self._interval = interval_ms / 1000
        self._clock = clock
        self._pending: list[str] = []
        self._last_flush: float | None = None  # None until the first flush: it is never delayed

    def begin(self) -> DeltaBatcher:
        """Start batching a new stream (one batcher serves a run's model calls in turn): nothing
        held, and its first chunk goes out at once. Returns the batcher."""
        self._pending.clear()
        self._last_flush = None
        return self

    def push(self, text: str) -> str | None:
        """Add a chunk; returns the text to emit now, or None to keep holding it. An empty chunk
        (a keep-alive) only lets held text out when its interval is over."""
        pending = self._pending
        if not pending:  # nothing held: the chunk goes out now, or is the first one held
            if not text:
                return None
            now = self._clock()
            if self._last_flush is not None and now - self._last_flush < self._interval:
                pending.append(text)
                return None
            self._last_flush = now
            return text
        if text:
            pending.append(text)
        now = self._clock()
        if now - self._last_flush < self._interval:
            return None
        self._last_flush = now
        return self._take()

    def flush(self) -> str | None:
        """Everything still held (at the end of the stream), or None."""
        return self._take() if self._pending else None

    def discard(self) -> None:
        """Forget held text (the model call is being retried from the start)."""
        self._pending.clear()

    def _take(self) -> str:
        text = "".join(self._pending)
        self._pending.clear()
        return text
