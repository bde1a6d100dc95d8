"""Output capture (head + tail of each stream, the middle counted); finding and killing
processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

from apps.engine.llm.text import storable


class CappedBuffer:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest."""

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        """The output as text a database stores (llm/text.py): bytes that are not UTF-8 and
        NUL become U+FFFD."""
        head = storable(self.head.decode("utf-8", "replace"))
        tail = storable(self.tail.decode("utf-8", "replace"))
        if not self.truncated:
            return head + tail
        omitted = self.total - len(self.head) - len(self.tail)
        return f"{head}\n[... {omitted} bytes of output omitted ...]\n{tail}"


class Capture(asyncio.SubprocessProtocol):
    """Feeds the pipes into capped buffers. Unlike `Process.wait()`, which also waits for the
    pipes to close, `exited` resolves when the process itself ends: a background child that
    keeps stdout open must not stretch the run."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int):
        self.out = CappedBuffer(limit)
        self.err = CappedBuffer(limit)
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        (self.out if fd == 1 else self.err).feed(data)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def killpg(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def processes_matching(needle: str) -> list[int]:
    """PIDs whose /proc/<pid>/cmdline contains `needle` (arguments are NUL-separated)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode("utf-8", "replace")
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmdline and state != b"Z":
            found.append(int(entry))
    return found


async def wait_for_no_process(needle: str, *, within: float) -> list[int]:
    """Poll until no process matches (killed processes take a moment to go); return survivors."""
    deadline = time.monotonic() + within
    while True:
        survivors = processes_matching(needle)
        if not survivors or time.monotonic() > deadline:
            return survivors
        await asyncio.sleep(0.05)
