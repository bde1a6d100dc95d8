"""`Sandbox`: picks a backend once, then runs commands confined to their workspace."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from apps.engine.sandbox import properties
from apps.engine.sandbox.bwrap import bwrap_argv
from apps.engine.sandbox.cgroups import CommandCgroup
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
from apps.engine.sandbox.execution import execute
from apps.engine.sandbox.exposure import Exposure
from apps.engine.sandbox.landlock import landlock_abi, launcher_argv
from apps.engine.sandbox.limits import (
    Limits,
    memory_error,
    prlimit_binary,
    uid_process_count,
)
from apps.engine.sandbox.properties import (
    backend_properties,
    memory_limit_mode,
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
        memory_cgroup: bool = True,
    ):
        """`backend` forces one backend (tests, benchmarks); None picks the best available that
        holds every property in `require`. `network` and `timeout_seconds` are the defaults of
        `run()`. `backends`: the ones that may be picked, in order of preference.
        `memory_cgroup` False: cap memory by RLIMIT_AS alone, even where a cgroup could."""
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
        self.memory_cgroup = memory_cgroup
        self.probes = properties.probe_backends()  # tests replace it on `properties`
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
                memory_mb=config.limits.memory_mb,
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
        return backend_properties(
            self.backend, network=self.network, memory_cgroup=self.memory_cgroup
        )

    def memory_limit_mode(self) -> tuple[str, str]:
        """How this sandbox caps a command's memory here: ('cgroup' | 'rlimit', detail)."""
        return memory_limit_mode(memory_cgroup=self.memory_cgroup)

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

    def _nproc(self, cgroup: CommandCgroup | None) -> int | None:
        """RLIMIT_NPROC for the command, None where a cgroup (or nothing, as root) caps it."""
        if (cgroup is not None and cgroup.caps_processes) or os.geteuid() == 0:
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
        cgroup: CommandCgroup | None = None,
    ) -> list[str]:
        """The full argv that confines `cmd` with this sandbox's backend and limits."""
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if not argv:
            raise ValueError("empty command")
        backend = self.backend
        if backend == UNCONFINED:
            return argv
        if self._prlimit:
            prlimit = self.limits.prlimit_argv(
                self._prlimit,
                nproc=self._nproc(cgroup),
                memory_cgroup=cgroup is not None and cgroup.caps_memory,
            )
            argv = [*prlimit, *argv]
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
        cgroup: CommandCgroup | None = None
        home, tmp = "/tmp/home", "/tmp"
        if self.backend in ("unshare", "landlock", UNCONFINED):
            private = Path(tempfile.mkdtemp(prefix="agentkit-sandbox-"))
        if private is not None and self.backend != "unshare":
            (private / "home").mkdir()
            (private / "tmp").mkdir()
            home, tmp = str(private / "home"), str(private / "tmp")
        try:
            if self.confined:
                cgroup = self._cgroup()  # a few mkdirs and writes in sysfs
            argv = self.command_argv(
                cmd,
                workdir,
                network=network,
                writable=writable_paths,
                private_dir=private,
                cgroup=cgroup,
            )
            result = await execute(
                argv,
                workdir,
                self.environment(workdir, home=home, tmp=tmp, extra=env),
                timeout,
                label=self.label,
                max_output_bytes=self.max_output_bytes,
                launcher=self.backend == "landlock",
                cgroup=cgroup,
            )
            if not self.confined:
                return result
            by_cgroup = cgroup is not None and cgroup.caps_memory
            return dataclasses.replace(
                result,
                memory_cap="cgroup" if by_cgroup else "rlimit",
                memory_error=memory_error(
                    self.limits,
                    by_cgroup=by_cgroup,
                    oom_kills=cgroup.oom_kills() if cgroup is not None else 0,
                    result=result,
                ),
            )
        finally:
            if cgroup is not None and not cgroup.remove(within=0):  # killed ones not reaped yet
                await asyncio.to_thread(cgroup.remove)
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)

    def _cgroup(self) -> CommandCgroup | None:
        """The run's cgroup: pids where they cap processes here, memory unless told not to."""
        pids = process_limit_mode()[0] == "cgroup"
        memory = self.memory_limit_mode()[0] == "cgroup"
        if not (pids or memory):
            return None
        cgroup = CommandCgroup.create(
            max_pids=self.limits.processes if pids else None,
            memory_mb=self.limits.memory_mb if memory else None,
        )
        if pids and "limits" in self.require and not (cgroup and cgroup.caps_processes):
            if cgroup is not None:
                cgroup.remove()
            raise SandboxUnavailable(
                "sandbox: could not create a pids cgroup to cap the command's processes, "
                "and sandbox.require lists limits"
            )
        return cgroup  # memory not capped by it: prlimit_argv lowers RLIMIT_AS instead

    def describe(self) -> str:
        if self.backend == UNCONFINED:
            return "sandbox off: commands run unconfined (sandbox.mode: off)"
        if not self.backend:
            return f"no sandbox backend available: {self.unavailable_reason}"
        detail = next((p.detail for p in self.probes if p.name == self.backend), "")
        layer = f" + Landlock ABI {self.landlock_abi} layer" if self.landlock_layer else ""
        return f"{self.backend}{layer} ({detail})"
