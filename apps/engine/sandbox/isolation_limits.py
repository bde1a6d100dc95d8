"""The limits part of `check_isolation` (isolation.py): a fork storm, memory hogs (one process
over its address space; the command tree over its memory cap, by a cgroup or the RLIMIT_AS
fallback), a file and a /tmp filler, the CPU limit — with small limits, so it runs in seconds."""

from __future__ import annotations

import shlex
from pathlib import Path

from apps.engine.sandbox.common import IsolationCheck, SandboxResult
from apps.engine.sandbox.exposure import sandbox_python
from apps.engine.sandbox.limits import Limits
from apps.engine.sandbox.runner import Sandbox

CHECK_LIMITS = Limits(
    processes=48,
    address_space_mb=768,
    memory_mb=256,
    cpu_seconds=30,
    file_size_mb=16,
    tmp_size_mb=16,
)


def python_command(code: str) -> str:
    return f"{shlex.quote(str(sandbox_python()))} -I -S -c {shlex.quote(code)}"


def last_line(result: SandboxResult) -> str:
    lines = (result.stderr or result.stdout).strip().splitlines()
    return lines[-1][:200] if lines else f"exit {result.exit_code}"


async def limit_checks(run, workspace: Path, box: Sandbox) -> list[IsolationCheck]:
    lim = CHECK_LIMITS
    out = []
    storm = (
        "import os, time\nn = 0\nfor _ in range(200):\n    try:\n        pid = os.fork()\n"
        "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30); os._exit(0)\n"
        "    n += 1\nprint(n)"
    )
    r = await run(python_command(storm), timeout=15)
    forked = int(r.stdout.split()[0]) if r.stdout.split() else -1
    out.append(
        IsolationCheck(
            f"limits: a fork storm stops at {lim.processes} processes",
            0 <= forked < lim.processes,
            f"forked {forked} of 200",
            "limits",
        )
    )
    r = await run(
        python_command(f"b = bytearray({lim.address_space_mb * 2} << 20); print('allocated')")
    )
    out.append(
        IsolationCheck(
            f"limits: allocating {lim.address_space_mb * 2} MB fails",
            "allocated" not in r.stdout,
            last_line(r),
            "limits",
        )
    )
    out.extend(await _memory_checks(run, box))
    r = await run(f"head -c {(lim.file_size_mb + 4) << 20} /dev/zero > big.bin")
    size = (workspace / "big.bin").stat().st_size if (workspace / "big.bin").exists() else 0
    (workspace / "big.bin").unlink(missing_ok=True)
    out.append(
        IsolationCheck(
            f"limits: a file stops at {lim.file_size_mb} MB",
            size <= lim.file_size_mb << 20,
            f"{size >> 20} MB written",
            "limits",
        )
    )
    n = lim.tmp_size_mb + 4
    r = await run(
        f'for i in $(seq {n}); do head -c 1048576 /dev/zero > "/tmp/fill.$i" || exit 1; done; '
        f"du -sm /tmp"
    )
    out.append(
        IsolationCheck(
            f"limits: /tmp holds at most {lim.tmp_size_mb} MB",
            r.exit_code != 0,
            last_line(r),
            "limits",
        )
    )
    r = await run("ulimit -t")
    out.append(
        IsolationCheck(
            f"limits: CPU time is capped at {lim.cpu_seconds} s",
            r.stdout.strip() == str(lim.cpu_seconds),
            f"ulimit -t: {r.stdout.strip() or last_line(r)}",
            "limits",
        )
    )
    return out


async def _memory_checks(run, box: Sandbox) -> list[IsolationCheck]:
    """One process writing twice the memory cap is stopped, with the memory_limit advice; where
    a cgroup caps the tree, two processes that each stay under the cap but not together are too
    (RLIMIT_AS, per process, cannot see that: not claimed)."""
    lim = CHECK_LIMITS
    mode = box.memory_limit_mode()[0]
    how = "the tree's cgroup" if mode == "cgroup" else "RLIMIT_AS"
    size = lim.memory_mb * 2
    r = await run(python_command(f"b = b'x' * ({size} << 20); print('allocated')"))
    out = [
        IsolationCheck(
            f"limits: writing {size} MB of memory stops at {lim.memory_mb} MB ({how}), "
            "reported as memory_limit",
            bool(r.memory_error) and "allocated" not in r.stdout,
            (r.memory_error or last_line(r))[:200],
            "limits",
        )
    ]
    if mode == "cgroup":
        part = lim.memory_mb * 5 // 8
        hold = python_command(f"import time; b = b'x' * ({part} << 20); time.sleep(2)")
        r = await run(f"{hold} & {hold} & wait")
        out.append(
            IsolationCheck(
                f"limits: two processes of {part} MB each stop at {lim.memory_mb} MB together",
                bool(r.memory_error),
                (r.memory_error or f"not stopped: exit {r.exit_code}")[:200],
                "limits",
            )
        )
    return out
