"""Prove what a sandbox holds with real commands (`manage.py check_sandbox`, tests): for every
property of common.PROPERTIES one or more probes, compared with what the backend claims here
(properties.py). Uses throw-away directories and small limits, so it runs in seconds."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apps.engine.sandbox.capture import wait_for_no_process
from apps.engine.sandbox.common import (
    PROPERTIES,
    SYSTEM_PATH,
    IsolationCheck,
    SandboxResult,
    is_secret_name,
)
from apps.engine.sandbox.isolation_limits import (
    CHECK_LIMITS,
    last_line,
    limit_checks,
    python_command,
)
from apps.engine.sandbox.runner import Sandbox


@dataclass
class IsolationReport:
    backend: str
    description: str
    checks: list[IsolationCheck] = field(default_factory=list)
    claims: dict[str, tuple[bool, str]] = field(default_factory=dict)
    require: tuple[str, ...] = ()
    confined: bool = True

    def status(self, name: str) -> tuple[str, str]:
        """('holds' | 'not held' | 'FAILS', detail) for one property: FAILS when the backend
        claims it but a probe shows otherwise."""
        held, how = self.claims.get(name, (False, "unknown"))
        failed = [c for c in self.checks if c.property == name and not c.passed]
        if held and failed:
            return "FAILS", "; ".join(f"{c.name}: {c.detail}" for c in failed)
        return ("holds", how) if held and self.confined else ("not held", how)

    @property
    def passed(self) -> bool:
        if not self.confined or not self.checks:
            return False
        statuses = {name: self.status(name)[0] for name in PROPERTIES}
        return "FAILS" not in statuses.values() and all(
            statuses[name] == "holds" for name in self.require
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "description": self.description,
            "passed": self.passed,
            "require": list(self.require),
            "properties": {
                name: dict(zip(("status", "detail"), self.status(name), strict=True))
                for name in PROPERTIES
            },
            "checks": [check.__dict__ for check in self.checks],
        }


_SECRET_CANARY = "AGENTKIT_CANARY_API_KEY"


async def check_isolation(
    sandbox: Sandbox, *, timeout: float = 20.0, require: tuple[str, ...] | None = None
) -> IsolationReport:
    """Run every probe through `sandbox` (a copy of it with small limits and a fake agentkit
    installation holding a secret key, a database and another workspace)."""
    sandbox.ensure_available()
    report = IsolationReport(
        sandbox.label,
        sandbox.describe(),
        claims=sandbox.properties(),
        require=tuple(sandbox.require if require is None else require),
        confined=sandbox.confined,
    )
    # Not under /tmp: the namespace backends give commands a fresh /tmp, which would hide the
    # outside directory instead of proving that reading or writing it is refused.
    base = Path(tempfile.mkdtemp(prefix="agentkit-check-", dir=_visible_tmp_root()))
    install = base / "install"
    workspace = install / "var" / "workspaces" / "ws"
    other = install / "var" / "workspaces" / "other"
    outside = base / "outside"
    for path in (workspace, other, outside):
        path.mkdir(parents=True)
    (install / ".secret_key").write_text("canary-secret-key\n")
    (install / "db.sqlite3").write_text("canary-database\n")
    (other / "notes.txt").write_text("canary-other-workspace\n")
    box = copy.copy(sandbox)
    box.limits = CHECK_LIMITS
    box.exposure = dataclasses.replace(sandbox.exposure, installation_root=install)
    checks = report.checks

    async def run(cmd: str, **kw: Any) -> SandboxResult:
        return await box.run(cmd, workspace, **{"timeout": timeout, **kw})

    previous = os.environ.get(_SECRET_CANARY)
    os.environ[_SECRET_CANARY] = "sk-canary-must-not-leak"
    servers: list[socket.socket] = []
    try:
        # no_network
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        servers.append(listener)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        r = await run(
            python_command(f"import socket; socket.create_connection(('127.0.0.1', {port}), 3)")
        )
        checks.append(
            IsolationCheck(
                "network: loopback connect to a listener outside is blocked",
                r.exit_code != 0,
                last_line(r) if r.exit_code else "connected: the network is NOT isolated",
                "no_network",
            )
        )
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        servers.append(udp)
        udp.bind(("127.0.0.1", 0))
        udp.setblocking(False)
        code = f"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp.getsockname()[1]}))"
        r = await run(python_command(code))
        await asyncio.sleep(0.05)
        try:
            udp.recv(16)
            got = True
        except BlockingIOError:
            got = False
        checks.append(
            IsolationCheck(
                "network: a UDP datagram to a host port does not arrive",
                not got,
                "datagram arrived" if got else last_line(r),
                "no_network",
            )
        )
        # read_only_host
        target = outside / "escaped.txt"
        r = await run(f"echo x > {shlex.quote(str(target))}")
        refused = not target.exists()
        checks.append(
            IsolationCheck(
                "filesystem: write outside the workspace is refused",
                refused,
                last_line(r) if refused else f"{target} was written",
                "read_only_host",
            )
        )
        r = await run("echo inside > inside.txt && cat inside.txt")
        wrote = r.exit_code == 0 and (workspace / "inside.txt").read_text() == "inside\n"
        checks.append(
            IsolationCheck(
                "filesystem: write inside the workspace works",
                wrote,
                "ok" if wrote else last_line(r),
                "read_only_host",
            )
        )
        # hidden_host_files
        secrets = [install / ".secret_key", install / "db.sqlite3", other / "notes.txt"]
        if os.access("/etc/shadow", os.R_OK):
            secrets.append(Path("/etc/shadow"))
        for path in secrets:
            r = await run(f"cat {shlex.quote(str(path))}")
            content = path.read_text(errors="replace").strip()
            leaked = bool(content) and content.splitlines()[0] in r.stdout
            checks.append(
                IsolationCheck(
                    f"files: {path.name if path.is_relative_to(base) else path} is unreadable",
                    not leaked,
                    f"read {path}" if leaked else last_line(r),
                    "hidden_host_files",
                )
            )
        r = await run(f"ls -A {shlex.quote(str(other.parent))}")
        listed = "other" in r.stdout.split()
        checks.append(
            IsolationCheck(
                "files: the other workspaces cannot be listed",
                not listed,
                "listed them" if listed else last_line(r),
                "hidden_host_files",
            )
        )
        # no_host_sockets
        sockets_dir = Path(tempfile.mkdtemp(prefix="agentkit-sock-", dir="/tmp"))
        try:
            paths = [outside / "host.sock", sockets_dir / "host.sock"]
            names = [str(p) for p in paths] + [f"\0agentkit-check-{os.getpid()}"]
            for name in names:
                server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                servers.append(server)
                server.bind(name)
                server.listen(4)
                os.chmod(name, 0o777) if not name.startswith("\0") else None
                code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({name!r}); print('connected')"
                r = await run(python_command(code))
                connected = "connected" in r.stdout
                shown = "@" + name[1:] if name.startswith("\0") else name
                checks.append(
                    IsolationCheck(
                        f"sockets: connecting to the host's {shown} is refused",
                        not connected,
                        "connected" if connected else last_line(r),
                        "no_host_sockets",
                    )
                )
        finally:
            shutil.rmtree(sockets_dir, ignore_errors=True)
        # unprivileged_user
        r = await run("id -u; grep CapEff /proc/self/status")
        words = r.stdout.split()
        caps = words[words.index("CapEff:") + 1] if "CapEff:" in words else "0"  # unreadable:
        # Landlock hides /proc/self; a uid other than 0 without file capabilities has none.
        unprivileged = bool(words) and words[0] != "0" and caps.strip("0") == ""
        checks.append(
            IsolationCheck(
                "user: not root, no capabilities",
                unprivileged,
                " ".join(words)[:200] or last_line(r),
                "unprivileged_user",
            )
        )
        if box.confined:
            checks.extend(await limit_checks(run, workspace, box))
        else:  # a fork storm, a memory hog and a /tmp filler would hit the host itself
            checks.append(
                IsolationCheck("limits: not probed", False, "commands run unconfined", "limits")
            )
        checks.extend(await _environment_checks(run))
        checks.append(await _tree_kill_check(run))
    finally:
        for server in servers:
            server.close()
        if previous is None:
            os.environ.pop(_SECRET_CANARY, None)
        else:
            os.environ[_SECRET_CANARY] = previous
        shutil.rmtree(base, ignore_errors=True)
    return report


async def _environment_checks(run) -> list[IsolationCheck]:
    r = await run("env")
    leaked = [
        line.split("=", 1)[0]
        for line in r.stdout.splitlines()
        if "=" in line and is_secret_name(line.split("=", 1)[0])
    ]
    out = [
        IsolationCheck(
            "environment: no secret reaches the command",
            r.exit_code == 0 and "sk-canary" not in r.stdout and not leaked,
            f"leaked: {', '.join(leaked)}"
            if leaked
            else f"{len(r.stdout.splitlines())} variables, none secret",
            "clean_environment",
        )
    ]
    # The agentkit process (or a worker) holds API keys in its environment; a sandboxed
    # command must not read them through /proc/<pid>/environ either.
    holder = subprocess.Popen(["sleep", "60"], env={**os.environ, "PATH": SYSTEM_PATH}, cwd="/")
    try:
        r = await run(f"cat /proc/{holder.pid}/environ")
    finally:
        holder.kill()
        holder.wait()
    readable = "sk-canary" in r.stdout
    out.append(
        IsolationCheck(
            "environment: another process's environment is unreadable via /proc",
            not readable,
            f"read /proc/{holder.pid}/environ" if readable else last_line(r),
            "clean_environment",
        )
    )
    return out


async def _tree_kill_check(run) -> IsolationCheck:
    marker = f"{900 + (os.getpid() % 97)}.{int(time.time() * 1000) % 100000}"
    spawn = f"sleep {marker} & setsid sleep {marker} & (sleep {marker} &) ; sleep {marker}"
    r = await run(spawn, timeout=0.5)
    survivors = await wait_for_no_process(f"sleep\0{marker}", within=2.0)
    for pid in survivors:  # only possible unconfined; do not leave them behind
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return IsolationCheck(
        "timeout: the command and all its children are killed",
        r.timed_out and not survivors,
        f"survivors: {survivors}" if survivors else f"killed after {r.duration:.1f} s",
        "tree_kill",
    )


def _visible_tmp_root() -> str | None:
    for candidate in ("/var/tmp", "/dev/shm"):
        if os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return None
