"""Run a command with no network and writes confined to the workspace, without Docker.

    sandbox = Sandbox.from_config(config.sandbox)      # once per process; detection is cached
    result = await sandbox.run("pytest -x -q", cwd=workspace, timeout=60)
    result.exit_code, result.stdout, result.stderr, result.duration, result.timed_out

Backends, best first; `probe_backends()` tries each once per process:

1. `bwrap` (bubblewrap): `/` read-only, private /dev, /proc, /tmp; the writable paths bound back;
   new network, pid, ipc and uts namespaces; all capabilities dropped; dies with its parent.
2. `unshare` (util-linux): a user + mount + pid (+ network) namespace; every mount is remounted
   read-only, the writable paths are bound back read-write, then `setpriv` drops every capability
   so the command cannot undo the remount. /tmp stays read-only: TMPDIR and HOME point at a
   private directory that is removed afterwards.
3. `landlock`: the kernel's unprivileged access control (ABI >= 4, so TCP connect/bind can be
   denied too), applied by a small Python launcher that also acts as child subreaper, so
   processes that escape the process group are still killed. Used where namespaces are
   unavailable (e.g. containers that forbid them). Other processes' /proc/<pid> files are
   unreadable (Landlock alone would let a command read their environ, API keys included).
   Weaker: UDP and pathname Unix sockets are not covered; /tmp and /dev/shm are not writable
   (TMPDIR is private; Python multiprocessing locks fail); without ABI 6 a command may signal
   processes of the same user. `landlock_layer=True` adds the same launcher inside the
   namespace backends as a second layer.

With `mode="off"` (chosen explicitly in agentkit.yaml) commands run unconfined. Otherwise, when no
backend works, `run()` raises `SandboxUnavailable` whose message says how to install bubblewrap.

Whatever the backend: the environment is rebuilt from scratch (PATH, HOME, TMPDIR, LANG and the
configured pass-through names; anything that looks like a secret is dropped), stdin is
/dev/null, the command runs in its own session and the whole tree is killed at the timeout or
when the command ends, and stdout/stderr are captured up to `max_output_bytes` each (head + tail;
the middle is drained and counted, never stored).

Framework-free: no Django; stdlib only, so the unprivileged tests can run it with any Python.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from apps.engine.config import SandboxConfig

log = logging.getLogger(__name__)

BackendName = Literal["bwrap", "unshare", "landlock"]
BACKENDS: tuple[BackendName, ...] = ("bwrap", "unshare", "landlock")
UNCONFINED = "none"

INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`, Fedora: "
    "`sudo dnf install bubblewrap`; `make run` / `make test` do it when run as root), or allow "
    "unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`, "
    "`kernel.apparmor_restrict_unprivileged_userns=0`), or use a kernel with Landlock ABI >= 4 "
    "(Linux 6.7+). To run commands unconfined instead, set `sandbox: {mode: 'off'}` in "
    "agentkit.yaml (quoted: YAML reads a bare off as false). "
    "`python manage.py check_sandbox` shows what was tried."
)

DEFAULT_MAX_OUTPUT_BYTES = 1 << 20  # per stream; tools cut further for the model
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Device files commands may write to (shell redirections, random numbers).
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
# Name parts that mark an environment variable as a secret: never passed to a command even when
# listed in env_passthrough. Matched against the name split on '_' (GIT_AUTHOR_NAME is fine).
_SECRET_PARTS = frozenset(
    {
        "APIKEY",
        "AUTH",
        "COOKIE",
        "CREDENTIAL",
        "CREDENTIALS",
        "KEY",
        "PASS",
        "PASSWD",
        "PASSWORD",
        "PRIVATE",
        "SECRET",
        "TOKEN",
    }
)
_URL_WITH_PASSWORD = re.compile(r"://[^/@\s]*:[^/@\s]*@")


class SandboxUnavailable(RuntimeError):
    """No backend can confine commands and the configuration does not allow running unconfined."""


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int  # 128 + N when killed by signal N (a timeout reports -9 / 137 as it happened)
    stdout: str
    stderr: str
    duration: float
    timed_out: bool
    backend: str  # bwrap | unshare | landlock | none
    truncated: bool = False  # some output exceeded max_output_bytes and was cut in the middle

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def combined_output(self) -> str:
        """stdout then stderr, as a terminal would roughly show them."""
        if self.stdout and self.stderr:
            return self.stdout.rstrip("\n") + "\n" + self.stderr
        return self.stdout or self.stderr


@dataclass(frozen=True)
class BackendProbe:
    name: str
    available: bool
    detail: str


# ── detection ──────────────────────────────────────────────────────────────────────────────────
_LANDLOCK_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is missing or disabled."""
    numbers = _LANDLOCK_SYSCALLS.get(platform.machine())
    if numbers is None:
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        abi = libc.syscall(ctypes.c_long(numbers[0]), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0
    return max(int(abi), 0)


def _try(argv: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=20,
            env={"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"},
            cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        return False, f"exit {done.returncode}: {message[-1] if message else 'no output'}"
    return True, "ok"


def _probe_bwrap() -> BackendProbe:
    binary = shutil.which("bwrap", path=SYSTEM_PATH)
    if not binary:
        return BackendProbe("bwrap", False, "bwrap not found on PATH")
    probe_dir = tempfile.mkdtemp(prefix="agentkit-probe-")
    try:
        argv = _bwrap_argv(
            binary, ["/bin/true"], cwd=Path(probe_dir), writable=[Path(probe_dir)], network=False
        )
        ok, detail = _try(argv)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    return BackendProbe("bwrap", ok, f"{binary}: {detail}" if ok else f"{binary} fails: {detail}")


def _probe_unshare() -> BackendProbe:
    unshare = shutil.which("unshare", path=SYSTEM_PATH)
    setpriv = shutil.which("setpriv", path=SYSTEM_PATH)
    if not unshare or not setpriv:
        missing = " and ".join(n for n, b in (("unshare", unshare), ("setpriv", setpriv)) if not b)
        return BackendProbe("unshare", False, f"{missing} not found on PATH (util-linux)")
    probe_dir = tempfile.mkdtemp(prefix="agentkit-probe-")
    try:
        argv = _unshare_argv(
            unshare,
            setpriv,
            ["/bin/true"],
            cwd=Path(probe_dir),
            writable=[Path(probe_dir)],
            network=False,
        )
        ok, detail = _try(argv)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    return BackendProbe(
        "unshare", ok, f"{unshare}: {detail}" if ok else f"{unshare} fails: {detail}"
    )


def _probe_landlock() -> BackendProbe:
    abi = landlock_abi()
    if abi <= 0:
        return BackendProbe("landlock", False, "Landlock not supported or disabled in this kernel")
    if abi < 4:
        return BackendProbe(
            "landlock",
            False,
            f"Landlock ABI {abi}: files only; ABI >= 4 (Linux 6.7) is needed to deny TCP",
        )
    return BackendProbe("landlock", True, f"Landlock ABI {abi}")


@lru_cache(maxsize=1)
def probe_backends() -> tuple[BackendProbe, ...]:
    """Try every backend once per process (a few milliseconds each), best first."""
    if sys.platform != "linux":
        reason = f"the sandbox needs Linux (this is {sys.platform})"
        return tuple(BackendProbe(name, False, reason) for name in BACKENDS)
    probes = (_probe_bwrap(), _probe_unshare(), _probe_landlock())
    for probe in probes:
        log.debug("sandbox backend %s: %s", probe.name, probe.detail)
    return probes


def available_backends() -> list[str]:
    return [probe.name for probe in probe_backends() if probe.available]


# ── argv builders ──────────────────────────────────────────────────────────────────────────────
def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _python_paths() -> list[Path]:
    """Directories the agentkit interpreter needs (the venv and its base Python)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent}
    return sorted(p.resolve() for p in paths if p.exists())


def _bwrap_argv(
    binary: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    writable: Sequence[Path],
    network: bool,
) -> list[str]:
    out = [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # A fresh /tmp hides whatever lived there: bring back what commands must still see (the
    # interpreter, a working directory that is not writable), shallow paths first.
    binds = [("--ro-bind", path) for path in [*_python_paths(), cwd] if _under(path, Path("/tmp"))]
    binds += [("--bind", path) for path in writable]
    for option, path in sorted(binds, key=lambda bind: len(bind[1].parts)):
        out += [option, str(path), str(path)]
    out += ["--dir", "/tmp/home"]
    if not network:
        out.append("--unshare-net")
    out += [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--chdir",
        str(cwd),
        "--",
        *argv,
    ]
    return out


# Runs as root of a fresh user namespace: remount everything read-only, bind the writable paths
# back read-write, give the command a private /dev/shm, then drop every capability (so the
# command cannot remount) and exec it. Arguments: working dir, writable paths, "--", the command.
_UNSHARE_SETUP = r"""
set -eu
IFS='
'
workdir=$1
shift
for mp in $(cut -d' ' -f5 /proc/self/mountinfo); do
  case $mp in *\\*) mp=$(printf '%b' "$mp");; esac
  mount -o remount,bind,ro "$mp" 2>/dev/null || {
    grep -q " $mp ro," /proc/self/mountinfo || { echo "sandbox: cannot make $mp read-only" >&2; exit 125; }
  }
done
[ -d /dev/shm ] && mount -t tmpfs -o mode=1777,size=64m tmpfs /dev/shm
while [ "$1" != "--" ]; do
  mount --bind "$1" "$1"
  mount -o remount,bind,rw "$1"
  shift
done
shift
cd "$workdir"
exec setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- "$@"
"""


def _unshare_argv(
    unshare: str,
    setpriv: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    writable: Sequence[Path],
    network: bool,
) -> list[str]:
    out = [unshare, "--user", "--map-root-user", "--mount", "--propagation", "private"]
    out += ["--pid", "--fork", "--kill-child", "--mount-proc", "--ipc", "--uts"]
    if not network:
        out.append("--net")
    setup = _UNSHARE_SETUP.replace("exec setpriv", f"exec {shlex.quote(setpriv)}")
    paths = [str(p) for p in sorted(writable, key=lambda p: len(p.parts))]
    return [*out, "--", "/bin/sh", "-c", setup, "agentkit-sandbox", str(cwd), *paths, "--", *argv]


# The Landlock launcher, run as `python -I -S -c LAUNCHER SPEC_JSON COMMAND...`. It becomes a
# child subreaper, forks, confines the child (no_new_privs + Landlock) and execs the command;
# it kills every remaining descendant when the command ends or when it receives SIGTERM/SIGINT/
# SIGHUP — also processes that started their own session. Stdlib-only and small: it starts per
# command.
_LAUNCHER = r"""
import ctypes, json, os, signal, sys, time
spec = json.loads(sys.argv[1]); argv = sys.argv[2:]
libc = ctypes.CDLL(None, use_errno=True)
def check(ret, what):
    if ret < 0:
        err = ctypes.get_errno()
        sys.stderr.write("sandbox: %s failed: %s\n" % (what, os.strerror(err))); os._exit(125)
    return ret
def confine():
    check(libc.prctl(38, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    abi = spec["abi"]
    if abi <= 0:
        return
    class Ruleset(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]
    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]
    fs = (1 << 13) - 1
    if abi >= 2: fs |= 1 << 13   # REFER
    if abi >= 3: fs |= 1 << 14   # TRUNCATE
    if abi >= 5: fs |= 1 << 15   # IOCTL_DEV
    read = 1 | 4 | 8             # EXECUTE, READ_FILE, READ_DIR
    file_rights = 1 | 2 | 4 | (1 << 14 if abi >= 3 else 0) | (1 << 15 if abi >= 5 else 0)
    attr = Ruleset(fs, 3 if (spec["deny_net"] and abi >= 4) else 0, 3 if abi >= 6 else 0)
    nr = spec["syscalls"]
    rs = check(libc.syscall(ctypes.c_long(nr[0]), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)), "landlock_create_ruleset")
    def allow(path, rights):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        if not os.path.isdir(path):
            rights &= file_rights
        rule = PathBeneath(rights, fd)
        check(libc.syscall(ctypes.c_long(nr[1]), ctypes.c_int(rs), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0)), "landlock_add_rule " + path)
        os.close(fd)
    # Read access everywhere except /proc/<pid>: Landlock does not stop reading another process's
    # environ (API keys) there, so pid directories, self and thread-self get no read rule.
    allow("/", 8)  # READ_DIR everywhere: listing names is harmless
    for top in os.listdir("/"):
        if top != "proc":
            allow("/" + top, read)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() and not os.path.islink("/proc/" + entry):
            allow("/proc/" + entry, read)
    for path in spec["devices"]: allow(path, 1 | 2 | 4 | (1 << 15 if abi >= 5 else 0))
    for path in spec["write"]: allow(path, fs)
    check(libc.syscall(ctypes.c_long(nr[2]), ctypes.c_int(rs), ctypes.c_uint32(0)), "landlock_restrict_self")
    os.close(rs)
def descendants():
    kids = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != b"Z":
                kids.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [os.getpid()]
    while todo:
        for child in kids.get(todo.pop(), ()):
            found.append(child); todo.append(child)
    return found
def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
def kill_all():
    for _ in range(500):
        alive = descendants()
        if not alive:
            return
        for pid in alive:
            try: os.kill(pid, signal.SIGKILL)
            except OSError: pass
        time.sleep(0.002); reap()
libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: clean up if agentkit dies
check(libc.prctl(36, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
stopping = []
def on_signal(signum, frame):
    stopping.append(signum); kill_all()
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, on_signal)
child = os.fork()
if child == 0:
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)
    confine()  # only the command: the launcher stays outside to see and kill its descendants
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write("sandbox: cannot run %s: %s\n" % (argv[0], exc.strerror)); os._exit(127)
while True:
    pid, status = os.waitpid(-1, 0)
    if pid == child:
        break
kill_all()
reap()
if stopping:
    os._exit(128 + stopping[0])
os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
"""


def _launcher_argv(
    argv: Sequence[str],
    *,
    abi: int,
    write: Sequence[Path],
    network: bool,
) -> list[str]:
    spec = {
        "abi": abi,
        "syscalls": list(_LANDLOCK_SYSCALLS.get(platform.machine(), (0, 0, 0))),
        "deny_net": not network,
        "devices": list(DEVICE_FILES),
        "write": [str(p) for p in write],
    }
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, json.dumps(spec), *argv]


# ── output capture ─────────────────────────────────────────────────────────────────────────────
class _CappedBuffer:
    """Keeps the first and last `limit // 2` bytes of a stream and counts the rest."""

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if not self.truncated:
            return head + tail
        omitted = self.total - len(self.head) - len(self.tail)
        return f"{head}\n[... {omitted} bytes of output omitted ...]\n{tail}"


class _Capture(asyncio.SubprocessProtocol):
    """Feeds the pipes into capped buffers. Unlike `Process.wait()`, which also waits for the
    pipes to close, `exited` resolves when the process itself ends: a background child that
    keeps stdout open must not stretch the run."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int):
        self.out = _CappedBuffer(limit)
        self.err = _CappedBuffer(limit)
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        (self.out if fd == 1 else self.err).feed(data)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def _killpg(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


# ── the sandbox ────────────────────────────────────────────────────────────────────────────────
def is_secret_name(name: str) -> bool:
    parts = set(name.upper().replace("-", "_").split("_"))
    return bool(parts & _SECRET_PARTS) or name.upper().endswith(("APIKEY", "TOKEN", "SECRET"))


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
    ):
        """`backend` forces one backend (tests, benchmarks); None picks the best available.
        `network` and `timeout_seconds` are the defaults of `run()`. `backends`: the ones that may
        be picked, in order of preference (sandbox.backends in agentkit.yaml)."""
        self.mode = mode
        self.network = network
        self.timeout_seconds = timeout_seconds
        self.env_passthrough = tuple(env_passthrough)
        self.max_output_bytes = max_output_bytes
        self.probes = probe_backends()
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
            self.backend = backend
        else:
            probes = {p.name: p for p in self.probes}
            allowed = [probes[name] for name in backends if name in probes]
            working = [p.name for p in allowed if p.available]
            self.backend = working[0] if working else ""
            if not working:
                tried = "; ".join(f"{p.name}: {p.detail}" for p in allowed) or (
                    "sandbox.backends allows none"
                )
                self.unavailable_reason = (
                    f"no sandbox backend works on this machine ({tried}). {INSTALL_HINT}"
                )
        abi = landlock_abi() if (landlock_layer or self.backend == "landlock") else 0
        self.landlock_abi = abi
        self.landlock_layer = bool(
            landlock_layer and abi > 0 and self.backend in ("bwrap", "unshare")
        )
        self._bwrap = shutil.which("bwrap", path=SYSTEM_PATH) or "bwrap"
        self._unshare = shutil.which("unshare", path=SYSTEM_PATH) or "unshare"
        self._setpriv = shutil.which("setpriv", path=SYSTEM_PATH) or "setpriv"

    @classmethod
    def from_config(cls, config: SandboxConfig, **overrides: Any) -> Sandbox:
        options: dict[str, Any] = {
            "mode": config.mode,
            "network": config.network,
            "timeout_seconds": config.timeout_seconds,
            "env_passthrough": tuple(config.env_passthrough),
            "backends": tuple(config.backends),
        }
        options.update(overrides)
        return cls(**options)

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

    def ensure_available(self) -> None:
        if not self.available:
            raise SandboxUnavailable(self.unavailable_reason or INSTALL_HINT)

    def environment(
        self, cwd: Path, *, home: str, tmp: str, extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The only variables a command sees. Secrets are dropped even when listed."""
        path = [str(Path(sys.executable).parent), SYSTEM_PATH]
        if (cwd / ".venv" / "bin").is_dir():
            path.insert(0, str(cwd / ".venv" / "bin"))
        env = {
            "PATH": ":".join(path),
            "HOME": home,
            "TMPDIR": tmp,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
        }
        candidates = {n: os.environ[n] for n in self.env_passthrough if n in os.environ}
        candidates.update(extra or {})
        for name, value in candidates.items():
            if is_secret_name(name) or _URL_WITH_PASSWORD.search(value):
                log.warning("sandbox: not passing %s to commands (looks like a secret)", name)
                continue
            env[name] = value
        return env

    def command_argv(
        self,
        cmd: str | Sequence[str],
        cwd: Path,
        *,
        network: bool,
        writable: Sequence[Path],
        private_dir: Path | None,
    ) -> list[str]:
        """The full argv that confines `cmd` with this sandbox's backend."""
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if not argv:
            raise ValueError("empty command")
        backend = self.backend
        if backend == UNCONFINED:
            return argv
        write = list(writable) + ([private_dir] if private_dir else [])
        if backend == "landlock" or self.landlock_layer:
            layer_write = write if backend == "landlock" else [*writable, Path("/tmp")]
            argv = _launcher_argv(argv, abi=self.landlock_abi, write=layer_write, network=network)
        if backend == "bwrap":
            return _bwrap_argv(self._bwrap, argv, cwd=cwd, writable=writable, network=network)
        if backend == "unshare":
            return _unshare_argv(
                self._unshare, self._setpriv, argv, cwd=cwd, writable=write, network=network
            )
        return argv

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
        and a private temp dir can be written; `network` None means this sandbox's default."""
        self.ensure_available()
        workdir = Path(cwd).resolve()
        if not workdir.is_dir():
            raise FileNotFoundError(f"sandbox: working directory {workdir} does not exist")
        writable_paths = [Path(p).resolve() for p in (writable or (workdir,))]
        for path in writable_paths:
            if not path.exists():
                raise FileNotFoundError(f"sandbox: writable path {path} does not exist")
        network = self.network if network is None else network
        timeout = self.timeout_seconds if timeout is None else timeout

        private: Path | None = None
        if self.backend == "bwrap":
            home, tmp = "/tmp/home", "/tmp"
        else:
            private = Path(tempfile.mkdtemp(prefix="agentkit-sandbox-"))
            (private / "home").mkdir()
            (private / "tmp").mkdir()
            home, tmp = str(private / "home"), str(private / "tmp")
        try:
            argv = self.command_argv(
                cmd, workdir, network=network, writable=writable_paths, private_dir=private
            )
            return await self._execute(
                argv, workdir, self.environment(workdir, home=home, tmp=tmp, extra=env), timeout
            )
        finally:
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)

    async def _execute(
        self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float
    ) -> SandboxResult:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        transport, capture = await loop.subprocess_exec(
            lambda: _Capture(loop, self.max_output_bytes),
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
                await self._stop(transport, capture)
        finally:
            if transport.get_returncode() is None:  # cancelled: never leave the tree running
                await self._stop(transport, capture)
            _killpg(pid)  # stragglers left in the group (matters for the unconfined mode)
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

    async def _stop(self, transport: asyncio.SubprocessTransport, capture: _Capture) -> None:
        """Kill the whole tree. The Landlock launcher gets SIGTERM first: it then kills every
        descendant, also those outside the process group; namespaces die with their init."""
        pid = transport.get_pid()
        if self.backend == "landlock":
            with contextlib.suppress(ProcessLookupError):
                transport.send_signal(signal.SIGTERM)
            await asyncio.wait([capture.exited], timeout=3.0)
        _killpg(pid)
        with contextlib.suppress(ProcessLookupError):
            transport.kill()
        await asyncio.wait([capture.exited], timeout=5.0)

    def describe(self) -> str:
        if self.backend == UNCONFINED:
            return "sandbox off: commands run unconfined (sandbox.mode: off)"
        if not self.backend:
            return f"no sandbox backend available: {self.unavailable_reason}"
        detail = next((p.detail for p in self.probes if p.name == self.backend), "")
        layer = f" + Landlock ABI {self.landlock_abi} layer" if self.landlock_layer else ""
        return f"{self.backend}{layer} ({detail})"


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


# ── self-test (manage.py check_sandbox, tests) ────────────────────────────────────────────────
@dataclass(frozen=True)
class IsolationCheck:
    name: str
    passed: bool
    detail: str


@dataclass
class IsolationReport:
    backend: str
    description: str
    checks: list[IsolationCheck] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "description": self.description,
            "passed": self.passed,
            "checks": [check.__dict__ for check in self.checks],
        }


_SECRET_CANARY = "AGENTKIT_CANARY_API_KEY"


async def check_isolation(sandbox: Sandbox, *, timeout: float = 20.0) -> IsolationReport:
    """Prove the sandbox isolates: a loopback listener outside is unreachable, a write outside
    the workspace is refused, a write inside works, secrets are not in the environment, and a
    timeout kills the command's children. Uses throw-away directories."""
    report = IsolationReport(sandbox.label, sandbox.describe())
    sandbox.ensure_available()
    # Not under /tmp: bwrap gives commands a fresh /tmp, which would hide the outside directory
    # instead of proving that writing to it is refused.
    base = Path(tempfile.mkdtemp(prefix="agentkit-check-", dir=_visible_tmp_root()))
    workspace, outside = base / "workspace", base / "outside"
    workspace.mkdir()
    outside.mkdir()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    previous = os.environ.get(_SECRET_CANARY)
    os.environ[_SECRET_CANARY] = "sk-canary-must-not-leak"
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        py = shlex.quote(sys.executable)
        connect = (
            f"{py} -I -S -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3)'"
        )
        result = await sandbox.run(connect, workspace, network=False, timeout=timeout)
        report.checks.append(
            IsolationCheck(
                "network: loopback connect to a listener outside is blocked",
                result.exit_code != 0,
                _last_line(result)
                if result.exit_code
                else "connected: the network is NOT isolated",
            )
        )
        target = outside / "escaped.txt"
        result = await sandbox.run(
            f"echo x > {shlex.quote(str(target))}", workspace, timeout=timeout
        )
        refused = result.exit_code != 0 and not target.exists()
        report.checks.append(
            IsolationCheck(
                "filesystem: write outside the workspace is refused",
                refused,
                _last_line(result) if refused else f"{target} was written",
            )
        )
        result = await sandbox.run(
            "echo inside > inside.txt && cat inside.txt", workspace, timeout=timeout
        )
        wrote = result.exit_code == 0 and (workspace / "inside.txt").read_text() == "inside\n"
        report.checks.append(
            IsolationCheck(
                "filesystem: write inside the workspace works",
                wrote,
                "ok" if wrote else _last_line(result),
            )
        )
        result = await sandbox.run("env", workspace, timeout=timeout)
        leaked = [
            line.split("=", 1)[0]
            for line in result.stdout.splitlines()
            if "=" in line and is_secret_name(line.split("=", 1)[0])
        ]
        report.checks.append(
            IsolationCheck(
                "environment: no secret reaches the command",
                result.exit_code == 0 and "sk-canary" not in result.stdout and not leaked,
                f"leaked: {', '.join(leaked)}"
                if leaked
                else f"{len(result.stdout.splitlines())} variables, none secret",
            )
        )
        # The agentkit process (or a worker) holds API keys in its environment; a sandboxed
        # command must not read them through /proc/<pid>/environ either.
        holder = subprocess.Popen(["sleep", "60"], env={**os.environ, "PATH": SYSTEM_PATH}, cwd="/")
        try:
            result = await sandbox.run(
                f"cat /proc/{holder.pid}/environ", workspace, timeout=timeout
            )
        finally:
            holder.kill()
            holder.wait()
        readable = "sk-canary" in result.stdout
        report.checks.append(
            IsolationCheck(
                "environment: another process's environment is unreadable via /proc",
                not readable,
                f"read /proc/{holder.pid}/environ" if readable else _last_line(result),
            )
        )
        marker = f"{900 + (os.getpid() % 97)}.{int(time.time() * 1000) % 100000}"
        spawn = f"sleep {marker} & setsid sleep {marker} & (sleep {marker} &) ; sleep {marker}"
        result = await sandbox.run(spawn, workspace, timeout=0.5)
        survivors = await wait_for_no_process(f"sleep\0{marker}", within=2.0)
        for pid in survivors:  # only possible unconfined; do not leave them behind
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        report.checks.append(
            IsolationCheck(
                "timeout: the command and all its children are killed",
                result.timed_out and not survivors,
                f"survivors: {survivors}" if survivors else f"killed after {result.duration:.1f} s",
            )
        )
    finally:
        listener.close()
        if previous is None:
            os.environ.pop(_SECRET_CANARY, None)
        else:
            os.environ[_SECRET_CANARY] = previous
        shutil.rmtree(base, ignore_errors=True)
    return report


def _visible_tmp_root() -> str | None:
    for candidate in ("/var/tmp", "/dev/shm"):
        if os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return None


def _last_line(result: SandboxResult) -> str:
    lines = (result.stderr or result.stdout).strip().splitlines()
    return lines[-1][:200] if lines else f"exit {result.exit_code}"


def processes_matching(needle: str) -> list[int]:
    """PIDs whose /proc/<pid>/cmdline contains `needle` (arguments are NUL-separated)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().decode("utf-8", "replace")
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmdline and state != b"Z":
            found.append(int(entry))
    return found


async def wait_for_no_process(needle: str, *, within: float) -> list[int]:
    """Poll until no process matches (killed processes take a moment to go); return survivors."""
    deadline = time.monotonic() + within
    while True:
        survivors = processes_matching(needle)
        if not survivors or time.monotonic() > deadline:
            return survivors
        await asyncio.sleep(0.05)
