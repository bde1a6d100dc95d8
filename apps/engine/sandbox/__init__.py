"""Run a command confined to its workspace, without Docker.

    sandbox = Sandbox.from_config(config.sandbox)      # once per process; detection is cached
    result = await sandbox.run("pytest -x -q", cwd=workspace, timeout=60)
    result.exit_code, result.stdout, result.stderr, result.duration, result.timed_out

What a command sees (exposure.py): the system read-only (/usr, /bin, /lib*, /etc minus secrets
such as /etc/shadow), its workspace read-write, a private size-capped /tmp, and read-only the
tool-chains it needs (agentkit's Python and venv, `sandbox.readable`) — never the agentkit
installation (secret key, database, var/ with the other workspaces, source), homes, or the host's
sockets. It runs as an unprivileged uid, with limits on processes, memory (the whole tree, by a
cgroup where one can be made: cgroups.py), address space, CPU time, file size and /tmp size
(limits.py), no network, a scrubbed environment, and the whole process tree is killed at the
timeout. A command that runs out of memory gets `result.memory_error` (what to do).

Backends, best first (`probe_backends()` tries each once per process): `bwrap` (bwrap.py),
`unshare` + pivot_root (unshare.py), a Landlock + seccomp launcher (landlock.py). What each holds
on this machine is `backend_properties()` (properties.py); `sandbox.require` names what must hold
and a backend that cannot is not chosen. `check_isolation()` (isolation.py, behind
`manage.py check_sandbox`) proves it with real commands.

With `mode="off"` (chosen explicitly in agentkit.yaml) commands run unconfined. Otherwise, when no
backend works, `run()` raises `SandboxUnavailable` whose message says how to install bubblewrap.

Framework-free: no Django; stdlib only, so the unprivileged tests can run it with any Python.
"""

import os
from collections.abc import Mapping, Sequence
from functools import lru_cache

from apps.engine.sandbox.capture import processes_matching, wait_for_no_process
from apps.engine.sandbox.common import (
    BACKENDS,
    DEFAULT_MAX_OUTPUT_BYTES,
    INSTALL_HINT,
    PROPERTIES,
    SANDBOX_UID,
    SYSTEM_PATH,
    UNCONFINED,
    BackendProbe,
    SandboxResult,
    SandboxUnavailable,
    is_secret_name,
)
from apps.engine.sandbox.exposure import Exposure, agentkit_root, sandbox_python
from apps.engine.sandbox.isolation import IsolationCheck, IsolationReport, check_isolation
from apps.engine.sandbox.landlock import landlock_abi
from apps.engine.sandbox.limits import Limits
from apps.engine.sandbox.properties import (
    available_backends,
    backend_properties,
    probe_backends,
)
from apps.engine.sandbox.runner import Sandbox

__all__ = [
    "BACKENDS",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "INSTALL_HINT",
    "PROPERTIES",
    "SANDBOX_UID",
    "SYSTEM_PATH",
    "UNCONFINED",
    "BackendProbe",
    "Exposure",
    "IsolationCheck",
    "IsolationReport",
    "Limits",
    "Sandbox",
    "SandboxResult",
    "SandboxUnavailable",
    "agentkit_root",
    "available_backends",
    "backend_properties",
    "check_isolation",
    "default_sandbox",
    "is_secret_name",
    "landlock_abi",
    "probe_backends",
    "processes_matching",
    "run",
    "sandbox_python",
    "wait_for_no_process",
]


@lru_cache(maxsize=1)
def default_sandbox() -> Sandbox:
    """The best backend with default settings, shared by callers that have no config."""
    return Sandbox()


async def run(
    cmd: str | Sequence[str],
    cwd: str | os.PathLike[str],
    *,
    network: bool = False,
    writable: Sequence[str | os.PathLike[str]] | None = None,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> SandboxResult:
    """Module-level shortcut: `default_sandbox().run(...)`."""
    return await default_sandbox().run(
        cmd, cwd, network=network, writable=writable, timeout=timeout, env=env
    )
