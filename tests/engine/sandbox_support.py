"""Shared by the sandbox tests: a fake agentkit installation and sandboxes over every backend
that works here (a backend expected here but unavailable fails
test_bubblewrap_works_when_running_as_root instead of being skipped silently)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from apps.engine.sandbox import Exposure, Limits, Sandbox, available_backends

BACKENDS_HERE = available_backends()
SMALL = Limits(processes=32, address_space_mb=512, cpu_seconds=20, file_size_mb=8, tmp_size_mb=8)


def fake_installation(root: Path) -> dict[str, Path]:
    """An agentkit installation as on disk: secret key, database, var/workspaces/<two>."""
    install = root / "install"
    workspace = install / "var" / "workspaces" / "mine"
    other = install / "var" / "workspaces" / "other"
    workspace.mkdir(parents=True)
    other.mkdir(parents=True)
    (install / ".secret_key").write_text("fake-secret-key-123\n")
    (install / "db.sqlite3").write_text("fake-database-rows\n")
    (other / "private.txt").write_text("other-workspace-content\n")
    return {"install": install, "workspace": workspace, "other": other}


def box_for(backend: str, install: Path, limits: Limits = SMALL) -> Sandbox:
    return Sandbox(backend=backend, exposure=Exposure(installation_root=install), limits=limits)


def holds(box: Sandbox, name: str) -> bool:
    return box.properties()[name][0]


async def host_responsive_while(coro, *, at_least_ticks: int) -> tuple[object, int]:
    """Run `coro` while the event loop ticks every 20 ms and the host spawns a process."""
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    work = asyncio.create_task(coro)
    await asyncio.sleep(0.8)
    started = time.monotonic()
    probe = await asyncio.create_subprocess_exec(
        "/bin/echo", "host", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(probe.communicate(), 10)
    assert out == b"host\n" and time.monotonic() - started < 5  # the host can still spawn
    result = await work
    ticking.cancel()
    assert ticks >= at_least_ticks, f"the event loop ticked only {ticks} times"
    return result, ticks
