"""`Sandbox`: picks a backend once, then runs commands confined to their workspace."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from apps.engine.sandbox.bwrap import bwrap_argv
from apps.engine.sandbox.capture import Capture, killpg
from apps.engine.sandbox.common import (
    BACKENDS,
    DEFAULT_MAX_OUTPUT_BYTES,
    INSTALL_HINT,
    PROPERTIES,
    SYSTEM_PATH,
    UNCONFINED,
    SandboxResult,
    SandboxUnavailable,
)
from apps.engine.sandbox.environment import command_environment
from apps.engine.sandbox.exposure import Exposure
from apps.engine.sandbox.landlock import landlock_abi, launcher_argv
from apps.engine.sandbox.limits import Limits, PidsCgroup, prlimit_binary, uid_process_count
from apps.engine.sandbox.properties import (
    backend_properties,
    missing_properties,
    process_limit_mode,
)
from apps.engine.sandbox.unshare import unshare_argv

if TYPE_CHECKING:
    from apps.engine.config import SandboxConfig

log = logging.getLogger(__name__)

# Sandbox.shared: the configuration object and the sandbox made from it.
_shared: tuple[SandboxConfig, Sandbox] | None = None


class Sandbox:
    """Runs commands confined to their workspace. Create once (detection is cached per process);
    `run()` is safe to call concurrently."""

    def __init__(
        self,
        *,
        mode: Literal["auto", "required", "off"] = "auto",
        backend: str | None = None,
        network: bool = False,
        timeout_seconds: float = 120.0,
        env_passthrough: Sequence[str] = ("LANG", "LC_ALL", "TZ"),
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        landlock_layer: bool = False,
        backends: Sequence[str] = BACKENDS,
        require: Sequence[str] = (),
        limits: Limits | None = None,
        exposure: Exposure | None = None,
    ):
        """`backend` forces one backend (tests, benchmarks); None picks the best available that
        holds every property in `require`. `network` and `timeout_seconds` are the defaults of
        `run()`. `backends`: the ones that may be picked, in order of preference."""
        from apps.engine import sandbox as package  # tests replace package.probe_backends

        unknown = sorted(set(require) - set(PROPERTIES))
        if unknown:
            raise ValueError(f"unknown sandbox properties {unknown}; known: {PROPERTIES}")
        self.mode = mode
        self.network = network
        self.timeout_seconds = timeout_seconds
        self.env_passthrough = tuple(env_passthrough)
        self.max_output_bytes = max_output_bytes
        self.require = tuple(require)
        self.limits = limits or Limits()
        self.exposure = exposure or Exposure()
        self.probes = package.probe_backends()
        self.unavailable_reason: str | None = None
        if mode == "off":
            self.backend = UNCONFINED
        elif backend is not None:
            probe = next((p for p in self.probes if p.name == backend), None)
            if probe is None:
                raise ValueError(f"unknown sandbox backend {backend!r}; known: {BACKENDS}")
            if not probe.available:
                raise SandboxUnavailable(
                    f"sandbox backend {backend} is not available: {probe.detail}"
                )
            missing = missing_properties(backend, self.require, network=network)
            if missing:
                raise SandboxUnavailable(
                    f"sandbox backend {backend} cannot hold what sandbox.require asks: "
                    + "; ".join(missing)
                )
            self.backend = backend
        else:
            self.backend = self._pick(backends)
        abi = landlock_abi() if (landlock_layer or self.backend == "landlock") else 0
        self.landlock_abi = abi
        self.landlock_layer = bool(
            landlock_layer and abi > 0 and self.backend in ("bwrap", "unshare")
        )
        self._bwrap = shutil.which("bwrap", path=SYSTEM_PATH) or "bwrap"
        self._prlimit = prlimit_binary()

    def _pick(self, backends: Sequence[str]) -> str:
        probes = {p.name: p for p in self.probes}
        tried = []
        for name in backends:
            probe = probes.get(name)
            if probe is None:
                continue
            if not probe.available:
                tried.append(f"{name}: {probe.detail}")
                continue
            missing = missing_properties(name, self.require, network=self.network)
            if not missing:
                return name
            tried.append(f"{name} cannot hold {'; '.join(missing)}")
        self.unavailable_reason = (
            f"no sandbox backend works on this machine with sandbox.require "
            f"{list(self.require)} ({'; '.join(tried) or 'sandbox.backends allows none'}). "
            f"{INSTALL_HINT}"
        )
        return ""

    @classmethod
    def from_config(cls, config: SandboxConfig, **overrides: Any) -> Sandbox:
        root = config.installation_root
        options: dict[str, Any] = {
            "mode": config.mode,
            "network": config.network,
            "timeout_seconds": config.timeout_seconds,
            "env_passthrough": tuple(config.env_passthrough),
            "backends": tuple(config.backends),
            "require": tuple(config.require),
            "limits": Limits(
                processes=config.limits.processes,
                address_space_mb=config.limits.address_space_mb,
                cpu_seconds=config.limits.cpu_seconds,
                file_size_mb=config.limits.file_size_mb,
                tmp_size_mb=config.limits.tmp_size_mb,
            ),
            "exposure": Exposure(
                readable=tuple(Path(p) for p in config.readable),
                hidden=tuple(Path(p) for p in config.hidden),
                **({"installation_root": Path(root).resolve()} if root else {}),
            ),
        }
        options.update(overrides)
        return cls(**options)

    @classmethod
    def shared(cls, config: SandboxConfig) -> Sandbox:
        """`from_config(config)`, made once per configuration object (the server loads its
        configuration once): a task's start builds no new one — the PATH look-ups and property
        checks cost ~2 ms of the event loop per task. A new configuration (a reload) gets a new
        sandbox; one that cannot be made is not remembered (it raises again)."""
        global _shared
        held = _shared
        if held is not None and held[0] is config:
            return held[1]
        sandbox = cls.from_config(config)
        _shared = (config, sandbox)
        return sandbox

    @property
    def available(self) -> bool:
        return bool(self.backend)

    @property
    def confined(self) -> bool:
        return self.backend not in ("", UNCONFINED)

    @property
    def label(self) -> str:
        """e.g. 'bwrap', 'bwrap+landlock', 'landlock', 'none' (unconfined), 'unavailable'."""
        if not self.backend:
            return "unavailable"
        return f"{self.backend}+landlock" if self.landlock_layer else self.backend

    def properties(self) -> dict[str, tuple[bool, str]]:
        """What this sandbox holds on this machine: {property: (held, how or why not)}."""
        return backend_properties(self.backend, network=self.network)

    def ensure_available(self) -> None:
        if not self.available:
            raise SandboxUnavailable(self.unavailable_reason or INSTALL_HINT)

    def environment(
        self, cwd: Path, *, home: str, tmp: str, extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The only variables a command sees. Secrets are dropped even when listed."""
        return command_environment(
            cwd, passthrough=self.env_passthrough, home=home, tmp=tmp, extra=extra
        )

    def _nproc(self, cgroup: PidsCgroup | None) -> int | None:
        """RLIMIT_NPROC for the command, None where a cgroup (or nothing, as root) caps it."""
        if cgroup is not None or os.geteuid() == 0:
            return None
        if self.backend == "landlock":  # no user namespace: the uid's processes all count
            return self.limits.processes + uid_process_count(os.geteuid())
        return self.limits.processes

    def command_argv(
        self,
        cmd: str | Sequence[str],
        cwd: Path,
        *,
        network: bool,
        writable: Sequence[Path],
        private_dir: Path | None,
        cgroup: PidsCgroup | None = None,
    ) -> list[str]:
        """The full argv that confines `cmd` with this sandbox's backend and limits."""
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if not argv:
            raise ValueError("empty command")
        backend = self.backend
        if backend == UNCONFINED:
            return argv
        if self._prlimit:
            argv = [*self.limits.prlimit_argv(self._prlimit, nproc=self._nproc(cgroup)), *argv]
        exposure = self.exposure
        shown = [*exposure.system_paths(), *exposure.toolchains(cwd), cwd, *writable]
        if backend == "landlock":
            home = [private_dir] if private_dir else []
            argv = launcher_argv(
                argv,
                abi=self.landlock_abi,
                read=[*shown, *home],
                hidden=exposure.hidden_paths(),
                write=[*writable, *home],
                network=network,
            )
        elif self.landlock_layer:
            argv = launcher_argv(
                argv,
                abi=self.landlock_abi,
                read=[*shown, Path("/tmp")],
                hidden=exposure.hidden_paths(),
                write=[*writable, Path("/tmp")],
                network=network,
                sockets=False,
            )
        if backend == "bwrap":
            argv = bwrap_argv(
                self._bwrap,
                argv,
                cwd=cwd,
                writable=writable,
                network=network,
                exposure=exposure,
                tmp_size_mb=self.limits.tmp_size_mb,
            )
        elif backend == "unshare":
            assert private_dir is not None
            argv = unshare_argv(
                argv,
                root=private_dir,
                cwd=cwd,
                writable=writable,
                network=network,
                exposure=exposure,
                tmp_size_mb=self.limits.tmp_size_mb,
            )
        return [*cgroup.argv(), *argv] if cgroup else argv

    async def run(
        self,
        cmd: str | Sequence[str],
        cwd: str | os.PathLike[str],
        *,
        network: bool | None = None,
        writable: Sequence[str | os.PathLike[str]] | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SandboxResult:
        """Run `cmd` (a string goes through /bin/sh -c) in `cwd`. Only `writable` (default: cwd)
        and a private /tmp can be written; `network` None means this sandbox's default."""
        self.ensure_available()
        workdir = Path(cwd).resolve()
        if not workdir.is_dir():
            raise FileNotFoundError(f"sandbox: working directory {workdir} does not exist")
        writable_paths = [Path(p).resolve() for p in (writable or (workdir,))]
        for path in writable_paths:
            if not path.exists():
                raise FileNotFoundError(f"sandbox: writable path {path} does not exist")
        if self.confined:
            try:
                self.exposure.validate_writable([workdir, *writable_paths])
            except ValueError as exc:
                raise SandboxUnavailable(str(exc)) from None
        network = self.network if network is None else network
        timeout = self.timeout_seconds if timeout is None else timeout

        private: Path | None = None  # unshare: the new root's mountpoint; else HOME and TMPDIR
        cgroup: PidsCgroup | None = None
        home, tmp = "/tmp/home", "/tmp"
        if self.backend in ("unshare", "landlock", UNCONFINED):
            private = Path(tempfile.mkdtemp(prefix="agentkit-sandbox-"))
        if private is not None and self.backend != "unshare":
            (private / "home").mkdir()
            (private / "tmp").mkdir()
            home, tmp = str(private / "home"), str(private / "tmp")
        if self.confined and process_limit_mode()[0] == "cgroup":
            cgroup = PidsCgroup.create(self.limits.processes)  # a mkdir and a write in sysfs
            if cgroup is None and "limits" in self.require:
                if private is not None:
                    shutil.rmtree(private, ignore_errors=True)
                raise SandboxUnavailable(
                    "sandbox: could not create a pids cgroup to cap the command's processes, "
                    "and sandbox.require lists limits"
                )
        try:
            argv = self.command_argv(
                cmd,
                workdir,
                network=network,
                writable=writable_paths,
                private_dir=private,
                cgroup=cgroup,
            )
            return await self._execute(
                argv,
                workdir,
                self.environment(workdir, home=home, tmp=tmp, extra=env),
                timeout,
                cgroup,
            )
        finally:
            if cgroup is not None and not cgroup.remove(within=0):  # killed ones not reaped yet
                await asyncio.to_thread(cgroup.remove)
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)

    async def _execute(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        timeout: float,
        cgroup: PidsCgroup | None,
    ) -> SandboxResult:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        transport, capture = await loop.subprocess_exec(
            lambda: Capture(loop, self.max_output_bytes),
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(cwd),
            env=env,
            start_new_session=True,
        )
        pid = transport.get_pid()
        timed_out = False
        try:
            try:
                await asyncio.wait_for(asyncio.shield(capture.exited), timeout)
            except TimeoutError:
                timed_out = True
                await self._stop(transport, capture, cgroup)
        finally:
            if transport.get_returncode() is None:  # cancelled: never leave the tree running
                await self._stop(transport, capture, cgroup)
            killpg(pid)  # stragglers left in the group (matters for the unconfined mode)
            # A process outside the group may still hold the pipes; do not wait for it.
            await asyncio.wait([capture.closed], timeout=1.0)
            transport.close()
        duration = time.monotonic() - started
        code = transport.get_returncode()
        code = -signal.SIGKILL if code is None else code
        return SandboxResult(
            exit_code=128 - code if code < 0 else code,
            stdout=capture.out.text(),
            stderr=capture.err.text(),
            duration=duration,
            timed_out=timed_out,
            backend=self.label,
            truncated=capture.out.truncated or capture.err.truncated,
        )

    async def _stop(
        self, transport: asyncio.SubprocessTransport, capture: Capture, cgroup: PidsCgroup | None
    ) -> None:
        """Kill the whole tree. The Landlock launcher gets SIGTERM first: it then kills every
        descendant, also those outside the process group; namespaces die with their init; a
        pids cgroup is emptied."""
        pid = transport.get_pid()
        if self.backend == "landlock":
            with contextlib.suppress(ProcessLookupError):
                transport.send_signal(signal.SIGTERM)
            await asyncio.wait([capture.exited], timeout=3.0)
        killpg(pid)
        with contextlib.suppress(ProcessLookupError):
            transport.kill()
        if cgroup is not None:
            await asyncio.to_thread(cgroup.kill)
        await asyncio.wait([capture.exited], timeout=5.0)

    def describe(self) -> str:
        if self.backend == UNCONFINED:
            return "sandbox off: commands run unconfined (sandbox.mode: off)"
        if not self.backend:
            return f"no sandbox backend available: {self.unavailable_reason}"
        detail = next((p.detail for p in self.probes if p.name == self.backend), "")
        layer = f" + Landlock ABI {self.landlock_abi} layer" if self.landlock_layer else ""
        return f"{self.backend}{layer} ({detail})"
