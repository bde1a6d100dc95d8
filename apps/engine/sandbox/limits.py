"""Resource limits of one command: processes, address space, CPU time, file size, /tmp size.

The rlimits are set by `prlimit` (util-linux) right before the command, inside the namespace, so
they bind the command and its children only. Processes: the kernel never applies RLIMIT_NPROC to
uid 0, and the namespace backends map the command's uid to agentkit's own uid outside, so when
agentkit runs as root a pids cgroup (v1 `pids` hierarchy, or v2 with the pids controller) caps
the number of processes instead; unprivileged, RLIMIT_NPROC does, counted per user namespace.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from apps.engine.sandbox.common import SYSTEM_PATH

MB = 1 << 20


@dataclass(frozen=True)
class Limits:
    processes: int = 512
    address_space_mb: int = 8192
    cpu_seconds: int = 600
    file_size_mb: int = 1024
    tmp_size_mb: int = 512

    def prlimit_argv(self, prlimit: str, *, nproc: int | None) -> list[str]:
        """`prlimit --as=N:N ... --` (soft = hard but for CPU time: the command cannot raise
        them)."""
        pairs = [
            ("as", f"{self.address_space_mb * MB}:{self.address_space_mb * MB}"),
            # SIGXCPU at the soft limit (exit 152, "CPU time limit exceeded"), SIGKILL 1 s later
            ("cpu", f"{self.cpu_seconds}:{self.cpu_seconds + 1}"),
            ("fsize", f"{self.file_size_mb * MB}:{self.file_size_mb * MB}"),
        ]
        if nproc is not None:
            pairs.append(("nproc", f"{nproc}:{nproc}"))
        return [prlimit, *(f"--{name}={value}" for name, value in pairs), "--"]


def prlimit_binary() -> str | None:
    return shutil.which("prlimit", path=SYSTEM_PATH)


def _pids_hierarchy() -> Path | None:
    """Where this process may create pids-limited child cgroups, or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):  # cgroup v1
            base = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
            if (base / "cgroup.procs").exists():
                return base
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2: children get pids.max only where pids is delegated
            base = Path("/sys/fs/cgroup") / path.lstrip("/")
            try:
                enabled = (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                return None
            return base if "pids" in enabled else None
    return None


class PidsCgroup:
    """A throw-away pids cgroup for one command: `argv()` prefixes a command so it joins before
    it execs; `kill()` ends every process in it; `remove()` deletes it."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup | None:
        base = _pids_hierarchy()
        if base is None:
            return None
        path = base / "agentkit-sandbox" / uuid.uuid4().hex[:12]
        try:
            path.mkdir(parents=True)
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def argv(self) -> list[str]:
        procs = str(self.path / "cgroup.procs")
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs]

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill(self) -> None:
        for _ in range(100):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self, *, within: float = 5.0) -> bool:
        """Kill what is left and delete the cgroup; killed processes leave it only once reaped,
        so retry for up to `within` seconds (call it off the event loop)."""
        deadline = time.monotonic() + within
        while True:
            self.kill()
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.002)


def pids_cgroup_available() -> bool:
    """Whether a pids cgroup can be made here (probed by making and removing one)."""
    group = PidsCgroup.create(64)
    if group is None:
        return False
    group.remove()
    return True


def uid_process_count(uid: int) -> int:
    """Processes (threads count too for RLIMIT_NPROC) this uid already runs."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                st = os.stat(f"/proc/{entry}")
                if st.st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                continue
    return count
