"""Throw-away cgroups of one command tree: a pids cap (as root, where RLIMIT_NPROC does not bind)
and a memory cap on the tree as a whole (RLIMIT_AS only caps each process).

Where: below agentkit's own cgroup, in each hierarchy that holds a wanted controller. cgroup v1
has one hierarchy per controller (e.g. /sys/fs/cgroup/pids, /sys/fs/cgroup/memory); cgroup v2 has
one for all, where a child gets a controller only when agentkit's cgroup delegates it
(`cgroup.subtree_control`). The command joins every directory before it execs (`argv()`), so its
whole tree is inside. Memory: v1 `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`, so
swap does not extend it), v2 `memory.max` (and `memory.swap.max` 0); when the tree exceeds it the
kernel's OOM killer kills a process inside, counted as `oom_kill N` in v1 `memory.oom_control`,
v2 `memory.events` (`oom_kills()`). Without write access (unprivileged, or no delegation)
nothing is created and the caller falls back to rlimits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

MB = 1 << 20
PARENT = "agentkit-sandbox"  # below agentkit's own cgroup; one child per command


@dataclass(frozen=True)
class Hierarchy:
    base: Path  # agentkit's own cgroup in this hierarchy
    version: int  # 1 or 2


def _mount_points() -> dict[str, Path]:
    """Mount point per v1 controller (pids, memory) and, under '', of the v2 hierarchy."""
    out: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, kind = left.split(), right.split()
        if len(fields) < 5 or len(kind) < 3:
            continue
        if kind[0] == "cgroup2":
            out.setdefault("", Path(fields[4]))
        elif kind[0] == "cgroup":
            for option in kind[2].split(","):
                out.setdefault(option, Path(fields[4]))
    return out


def hierarchy(controller: str) -> Hierarchy | None:
    """Where children of agentkit's cgroup can get `controller`, or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mounts = _mount_points()
    entries = [line.split(":", 2) for line in lines if line.count(":") >= 2]
    for _, controllers, path in entries:
        if controller in controllers.split(",") and controller in mounts:  # v1
            base = mounts[controller] / path.lstrip("/")
            return Hierarchy(base, 1) if (base / "cgroup.procs").exists() else None
    for _, controllers, path in entries:
        if controllers == "" and "" in mounts:  # v2
            base = mounts[""] / path.lstrip("/")
            try:
                enabled = (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                return None
            return Hierarchy(base, 2) if controller in enabled else None
    return None


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _cap_memory(path: Path, version: int, limit: int) -> None:
    """Set the memory cap; swap may not extend it (where swap is accounted at all)."""
    if version == 1:
        _write(path / "memory.limit_in_bytes", str(limit))
        if (path / "memory.memsw.limit_in_bytes").exists():
            with contextlib.suppress(OSError):
                _write(path / "memory.memsw.limit_in_bytes", str(limit))
    else:
        _write(path / "memory.max", str(limit))
        if (path / "memory.swap.max").exists():
            with contextlib.suppress(OSError):
                _write(path / "memory.swap.max", "0")


def _make_dir(where: Hierarchy, name: str, controllers: list[str]) -> Path:
    parent = where.base / PARENT
    for _ in range(3):  # the last command's removal may take the parent away meanwhile
        parent.mkdir(exist_ok=True)
        if where.version == 2:  # the parent holds no process, so it may hand controllers on
            with contextlib.suppress(OSError):
                _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in controllers))
        try:
            (parent / name).mkdir()
            return parent / name
        except FileNotFoundError:
            continue
    raise OSError(f"could not create {parent / name}")


class CommandCgroup:
    """One command tree's cgroup directories (one per hierarchy). `argv()` prefixes a command so
    it joins them before it execs; `oom_kills()` counts the memory cap's kills; `kill()` ends
    every process inside; `remove()` deletes them."""

    def __init__(self, paths: list[Path], *, pids: bool, memory: tuple[Path, int] | None):
        self.paths = paths
        self.caps_processes = pids
        self.memory = memory  # (directory, cgroup version) where the memory cap is set

    @property
    def caps_memory(self) -> bool:
        return self.memory is not None

    @classmethod
    def create(
        cls, *, max_pids: int | None = None, memory_mb: int | None = None
    ) -> CommandCgroup | None:
        """Cap what can be capped here; None when nothing can."""
        wanted: dict[Hierarchy, list[str]] = {}
        for controller, value in (("pids", max_pids), ("memory", memory_mb)):
            where = hierarchy(controller) if value is not None else None
            if where is not None:
                wanted.setdefault(where, []).append(controller)
        name = uuid.uuid4().hex[:12]
        paths: list[Path] = []
        pids, memory = False, None
        for where, controllers in wanted.items():
            try:
                path = _make_dir(where, name, controllers)
            except OSError:
                continue
            capped = False
            with contextlib.suppress(OSError):
                if "pids" in controllers:
                    _write(path / "pids.max", str(max_pids))
                    pids = capped = True
            with contextlib.suppress(OSError):
                if "memory" in controllers and memory_mb is not None:
                    _cap_memory(path, where.version, memory_mb * MB)
                    memory, capped = (path, where.version), True
            if capped:
                paths.append(path)
            else:
                with contextlib.suppress(OSError):
                    path.rmdir()
        return cls(paths, pids=pids, memory=memory) if paths else None

    def argv(self) -> list[str]:
        joins = " && ".join(f'echo $$ > "${index}"' for index in range(1, len(self.paths) + 1))
        script = f'{joins} && shift {len(self.paths)} && exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *(str(p / "cgroup.procs") for p in self.paths)]

    def oom_kills(self) -> int:
        """Processes the kernel killed because the tree went over the memory cap."""
        if self.memory is None:
            return 0
        path, version = self.memory
        name = "memory.oom_control" if version == 1 else "memory.events"
        try:
            for line in (path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.paths:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        return sorted(found)

    def kill(self) -> None:
        for _ in range(100):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self, *, within: float = 5.0) -> bool:
        """Kill what is left and delete the directories; killed processes leave only once
        reaped, so retry for up to `within` seconds (call it off the event loop)."""
        deadline = time.monotonic() + within
        left = list(self.paths)
        while True:
            self.kill()
            for path in list(left):
                try:
                    path.rmdir()
                    left.remove(path)
                except FileNotFoundError:
                    left.remove(path)
                except OSError:
                    pass
            if not left:
                for path in self.paths:  # the parent too, once no command uses it: nothing
                    with contextlib.suppress(OSError):  # of agentkit's stays in the hierarchy
                        path.parent.rmdir()
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)


def probe(controller: str) -> tuple[bool, str]:
    """Whether a child cgroup with `controller` can be made here (made and removed), and how or
    why not."""
    where = hierarchy(controller)
    if where is None:
        return False, (
            f"no cgroup hierarchy delegates the {controller} controller to agentkit's cgroup "
            "(cgroup v1 mount or v2 cgroup.subtree_control)"
        )
    group = CommandCgroup.create(
        **({"max_pids": 64} if controller == "pids" else {"memory_mb": 64})
    )
    held = group is not None and (
        group.caps_processes if controller == "pids" else group.caps_memory
    )
    if group is not None:
        group.remove()
    if not held:
        return False, f"{where.base} is not writable (agentkit is not root, or not delegated)"
    files = {
        ("pids", 1): "v1 pids.max",
        ("pids", 2): "v2 pids.max",
        ("memory", 1): "v1 memory.limit_in_bytes",
        ("memory", 2): "v2 memory.max",
    }
    return True, f"cgroup {files[(controller, where.version)]}"
