"""Resource limits of one command: processes, memory, address space, CPU time, file size, /tmp
size.

The rlimits are set by `prlimit` (util-linux) right before the command, inside the namespace, so
they bind the command and its children only. Processes: the kernel never applies RLIMIT_NPROC to
uid 0, and the namespace backends map the command's uid to agentkit's own uid outside, so when
agentkit runs as root a pids cgroup (cgroups.py) caps the number of processes instead;
unprivileged, RLIMIT_NPROC does, counted per user namespace. Memory: a memory cgroup caps the
whole tree at `memory_mb` where one can be made (cgroups.py); elsewhere RLIMIT_AS falls back to
min(`address_space_mb`, `memory_mb`) per process — it cannot cap the tree's total, and a process
over it sees a failed allocation (MemoryError, ENOMEM) rather than a kill.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

from apps.engine.sandbox.common import SYSTEM_PATH, SandboxResult

MB = 1 << 20


@dataclass(frozen=True)
class Limits:
    processes: int = 512
    address_space_mb: int = 8192
    memory_mb: int = 2048  # the whole tree, by a memory cgroup; else RLIMIT_AS falls back to it
    cpu_seconds: int = 600
    file_size_mb: int = 1024
    tmp_size_mb: int = 512

    def address_space_cap(self, *, memory_cgroup: bool) -> int:
        """RLIMIT_AS in MiB: `address_space_mb`, or no more than `memory_mb` where no memory
        cgroup caps the tree."""
        if memory_cgroup:
            return self.address_space_mb
        return min(self.address_space_mb, self.memory_mb)

    def prlimit_argv(self, prlimit: str, *, nproc: int | None, memory_cgroup: bool) -> list[str]:
        """`prlimit --as=N:N ... --` (soft = hard but for CPU time: the command cannot raise
        them)."""
        space = self.address_space_cap(memory_cgroup=memory_cgroup) * MB
        pairs = [
            ("as", f"{space}:{space}"),
            # SIGXCPU at the soft limit (exit 152, "CPU time limit exceeded"), SIGKILL 1 s later
            ("cpu", f"{self.cpu_seconds}:{self.cpu_seconds + 1}"),
            ("fsize", f"{self.file_size_mb * MB}:{self.file_size_mb * MB}"),
        ]
        if nproc is not None:
            pairs.append(("nproc", f"{nproc}:{nproc}"))
        return [prlimit, *(f"--{name}={value}" for name, value in pairs), "--"]


def prlimit_binary() -> str | None:
    return shutil.which("prlimit", path=SYSTEM_PATH)


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


# What programs print when an allocation fails (CPython, ENOMEM from mmap/fork, C++, Go, Node,
# Rust, Perl, GCC): under the RLIMIT_AS cap a process is refused memory, not killed.
_ALLOCATION_FAILED = re.compile(
    r"\bMemoryError\b|Cannot allocate memory|std::bad_alloc|out of memory"
    r"|memory allocation of \d+ bytes failed|virtual memory exhausted",
    re.IGNORECASE,
)
_TAIL = 4096


def allocation_failed(stdout: str, stderr: str) -> bool:
    """Whether the end of a failed command's output reports a failed allocation (a heuristic:
    the program has to say so)."""
    return any(_ALLOCATION_FAILED.search(text[-_TAIL:]) for text in (stdout, stderr))


_LESS = (
    "Use less memory (smaller inputs, process data in chunks or streams, fewer processes or "
    "workers at once)"
)


def memory_error_message(*, oom_killed: bool, cap_mb: int, setting: str) -> str:
    """Why the command ran out of memory and what to do, for the model and the user."""
    if oom_killed:
        return (
            f"the command needed more than {cap_mb} MiB of memory (all its processes together, "
            f"capped by a cgroup) and was killed. {_LESS}, or raise sandbox.limits.{setting}."
        )
    return (
        f"the command ran out of memory: an allocation failed at the sandbox's cap of {cap_mb} "
        f"MiB of address space per process (RLIMIT_AS). {_LESS}, or raise "
        f"sandbox.limits.{setting}."
    )


def memory_error(limits: Limits, *, by_cgroup: bool, oom_kills: int, result: SandboxResult) -> str:
    """Why a confined command ran out of memory, '' when it did not: the cgroup's OOM kills
    (exact), else a failed allocation the command reports (RLIMIT_AS refuses, it does not kill)."""
    if by_cgroup and oom_kills > 0:
        return memory_error_message(oom_killed=True, cap_mb=limits.memory_mb, setting="memory_mb")
    if result.exit_code != 0 and allocation_failed(result.stdout, result.stderr):
        space = limits.address_space_cap(memory_cgroup=by_cgroup)
        lowered = not by_cgroup and space == limits.memory_mb
        return memory_error_message(
            oom_killed=False, cap_mb=space, setting="memory_mb" if lowered else "address_space_mb"
        )
    return ""
