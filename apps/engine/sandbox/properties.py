"""Which backends work here (`probe_backends`, once per process) and what each one holds on this
machine (`backend_properties`): for every property of common.PROPERTIES, held or not and why.
`check_sandbox` proves the claims with real commands (isolation.py)."""

from __future__ import annotations

import logging
import os
import sys
from functools import lru_cache

from apps.engine.sandbox import cgroups
from apps.engine.sandbox.bwrap import probe_bwrap
from apps.engine.sandbox.common import BACKENDS, PROPERTIES, UNCONFINED, BackendProbe
from apps.engine.sandbox.landlock import landlock_abi, probe_landlock
from apps.engine.sandbox.limits import prlimit_binary
from apps.engine.sandbox.unshare import probe_unshare

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def probe_backends() -> tuple[BackendProbe, ...]:
    """Try every backend once per process (a few milliseconds each), best first."""
    if sys.platform != "linux":
        reason = f"the sandbox needs Linux (this is {sys.platform})"
        return tuple(BackendProbe(name, False, reason) for name in BACKENDS)
    probes = (probe_bwrap(), probe_unshare(), probe_landlock())
    for probe in probes:
        log.debug("sandbox backend %s: %s", probe.name, probe.detail)
    return probes


def available_backends() -> list[str]:
    return [probe.name for probe in probe_backends() if probe.available]


@lru_cache(maxsize=2)
def _cgroup(controller: str) -> tuple[bool, str]:
    return cgroups.probe(controller)


def process_limit_mode() -> tuple[str, str]:
    """How the number of processes is capped here: ('cgroup' | 'rlimit' | '', detail)."""
    if _cgroup("pids")[0]:
        return "cgroup", "a pids cgroup per command"
    if os.geteuid() != 0:
        return "rlimit", "RLIMIT_NPROC"
    return "", (
        "agentkit runs as root, the kernel does not apply RLIMIT_NPROC to uid 0 and no pids "
        "cgroup can be created here (mount the cgroup pids controller writable)"
    )


def memory_limit_mode(*, memory_cgroup: bool = True) -> tuple[str, str]:
    """How memory is capped here: ('cgroup' | 'rlimit', detail). `memory_cgroup` False: the
    sandbox was told to use RLIMIT_AS only."""
    held, how = _cgroup("memory")
    if memory_cgroup and held:
        return "cgroup", f"a memory cgroup per command tree ({how}), OOM kills counted"
    why = how if memory_cgroup else "the sandbox is set to use rlimits only"
    return "rlimit", (
        f"RLIMIT_AS per process, not the tree's total ({why}); a process over it sees a failed "
        "allocation, recognised by what it prints (MemoryError, 'Cannot allocate memory', "
        "'out of memory' ...)"
    )


def _limits(backend: str, memory_cgroup: bool) -> tuple[bool, str]:
    if not prlimit_binary():
        return False, "prlimit (util-linux) not found: no rlimits can be set"
    mode, detail = process_limit_mode()
    parts = [
        f"processes: {detail}",
        f"memory: {memory_limit_mode(memory_cgroup=memory_cgroup)[1]}",
        "address space, CPU time, file size: prlimit",
    ]
    held = bool(mode)
    if backend == "landlock":
        held = False
        parts.append(
            "/tmp size: NOT capped (no mount namespace, so no private tmpfs; TMPDIR is a host "
            "directory where only RLIMIT_FSIZE caps each file)"
        )
        if mode == "rlimit":
            parts[0] = "processes: RLIMIT_NPROC on top of what agentkit's uid already runs"
    else:
        parts.append("/tmp size: tmpfs size=")
    return held, "; ".join(parts)


def backend_properties(
    backend: str, *, network: bool = False, memory_cgroup: bool = True
) -> dict[str, tuple[bool, str]]:
    """For each property: (held, how or why not) for `backend` on this machine."""
    if backend in ("", UNCONFINED):
        return {name: (False, "commands run unconfined") for name in PROPERTIES}
    root = os.geteuid() == 0
    if backend in ("bwrap", "unshare"):
        sockets = (
            (
                True,
                "the host /run, /var/run and /tmp are not mounted; abstract sockets stay in "
                "the network namespace",
            )
            if not network
            else (False, "with the network on, abstract Unix sockets of the host are reachable")
        )
        out = {
            "no_network": (
                not network,
                "network namespace with loopback only"
                if not network
                else "sandbox.network is true",
            ),
            "read_only_host": (True, "new root: system read-only, workspace and /tmp writable"),
            "hidden_host_files": (
                True,
                "new root with only the system paths (/etc secrets masked), tool-chains, the "
                "workspace and a private /tmp: no installation, other workspace or home",
            ),
            "no_host_sockets": sockets,
            "unprivileged_user": (
                True,
                "uid/gid 1000 in a user namespace, no capabilities, no_new_privs "
                "(agentkit's uid outside, so workspace files stay agentkit's)",
            ),
        }
    else:
        abi = landlock_abi()
        scoped = (
            "; abstract sockets and signals scoped (ABI >= 6)"
            if abi >= 6
            else f"; Landlock ABI {abi} < 6 cannot scope abstract Unix sockets or signals"
        )
        out = {
            "no_network": (
                not network,
                "Landlock denies TCP connect/bind, seccomp refuses AF_INET/AF_INET6 sockets (UDP)"
                if not network
                else "sandbox.network is true",
            ),
            "read_only_host": (True, "Landlock: writes only below the workspace and private dir"),
            "hidden_host_files": (
                True,
                "Landlock read allow-list: system paths minus /etc secrets, tool-chains, the "
                "workspace; other paths can be named but not read or listed",
            ),
            "no_host_sockets": (
                True,
                "seccomp refuses every AF_UNIX socket (Landlock does not control connect(2) on "
                "pathname sockets), so the command cannot use Unix sockets at all" + scoped,
            ),
            "unprivileged_user": (
                (
                    False,
                    "agentkit runs as root and Landlock has no user namespace: the command "
                    "runs as uid 0 (owner of root's files)",
                )
                if root
                else (True, f"agentkit's own uid {os.geteuid()} (not root), no_new_privs")
            ),
        }
    out["limits"] = _limits(backend, memory_cgroup)
    out["clean_environment"] = (True, "environment rebuilt; secret-looking names dropped")
    out["tree_kill"] = (
        True,
        "pid namespace dies with its init" if backend != "landlock" else "subreaper launcher",
    )
    return out


def missing_properties(backend: str, require: tuple[str, ...], *, network: bool) -> list[str]:
    """'name: why' for every required property `backend` cannot hold here."""
    claims = backend_properties(backend, network=network)
    return [f"{name}: {claims[name][1]}" for name in require if not claims[name][0]]
