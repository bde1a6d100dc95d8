"""Run one confined argv to its end: output captured (capped), the whole tree killed at the
timeout or when the caller is cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
from pathlib import Path

from apps.engine.sandbox.capture import Capture, killpg
from apps.engine.sandbox.cgroups import CommandCgroup
from apps.engine.sandbox.common import SandboxResult


async def execute(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    *,
    label: str,
    max_output_bytes: int,
    launcher: bool,
    cgroup: CommandCgroup | None,
) -> SandboxResult:
    """`launcher`: argv starts with the Landlock launcher (it gets SIGTERM first)."""
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    spawn = asyncio.ensure_future(
        loop.subprocess_exec(
            lambda: Capture(loop, max_output_bytes),
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(cwd),
            env=env,
            start_new_session=True,
        )
    )
    try:
        transport, capture = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # Cancelled while the process was being started: asyncio's own clean-up of a cancelled
        # start kills the direct child only, then waits for pipes its orphans hold (as long as
        # they run). Let the start finish, kill the whole tree, then end cancelled.
        with contextlib.suppress(Exception):
            transport, capture = await spawn
            await end(transport, capture, cgroup, launcher=launcher)
        raise
    timed_out = False
    try:
        try:
            await asyncio.wait_for(asyncio.shield(capture.exited), timeout)
        except TimeoutError:
            timed_out = True
            await stop(transport, capture, cgroup, launcher=launcher)
    finally:
        await end(transport, capture, cgroup, launcher=launcher)
    duration = time.monotonic() - started
    code = transport.get_returncode()
    code = -signal.SIGKILL if code is None else code
    return SandboxResult(
        exit_code=128 - code if code < 0 else code,
        stdout=capture.out.text(),
        stderr=capture.err.text(),
        duration=duration,
        timed_out=timed_out,
        backend=label,
        truncated=capture.out.truncated or capture.err.truncated,
    )


async def end(
    transport: asyncio.SubprocessTransport,
    capture: Capture,
    cgroup: CommandCgroup | None,
    *,
    launcher: bool,
) -> None:
    """However the run ended (exited, timed out, cancelled): never leave the tree running."""
    if transport.get_returncode() is None:  # cancelled
        await stop(transport, capture, cgroup, launcher=launcher)
    killpg(transport.get_pid())  # stragglers left in the group (matters for the unconfined mode)
    # A process outside the group may still hold the pipes; do not wait for it.
    await asyncio.wait([capture.closed], timeout=1.0)
    transport.close()


async def stop(
    transport: asyncio.SubprocessTransport,
    capture: Capture,
    cgroup: CommandCgroup | None,
    *,
    launcher: bool,
) -> None:
    """Kill the whole tree. The Landlock launcher gets SIGTERM first: it then kills every
    descendant, also those outside the process group; namespaces die with their init; a
    cgroup is emptied."""
    pid = transport.get_pid()
    if launcher:
        with contextlib.suppress(ProcessLookupError):
            transport.send_signal(signal.SIGTERM)
        await asyncio.wait([capture.exited], timeout=3.0)
    killpg(pid)
    with contextlib.suppress(ProcessLookupError):
        transport.kill()
    if cgroup is not None:
        await asyncio.to_thread(cgroup.kill)
    await asyncio.wait([capture.exited], timeout=5.0)
