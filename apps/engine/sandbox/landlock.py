"""The Landlock backend: the kernel's unprivileged access control, applied by a small Python
launcher to the command it execs. Used where namespaces are unavailable (containers that forbid
them). What it holds, and what it cannot, is listed in properties.py:

- reads only below the allow-list (system paths minus hidden files, tool-chains, workspace,
  private dir, /dev, non-pid /proc entries): the installation, other workspaces, homes, the host
  /tmp and other processes' /proc/<pid> (their environ holds API keys) are unreadable, though
  their names can still be resolved;
- writes only to the workspace, the private dir and a few device files;
- a seccomp filter refuses socket(2) for AF_UNIX always (Landlock does not control connect(2) on
  pathname Unix sockets) and for AF_INET/AF_INET6 when the network is off (Landlock ABI 4 covers
  TCP only, not UDP); io_uring, which could open sockets behind it, is refused too. With ABI >= 6
  abstract Unix sockets and signals are scoped to the command as well;
- no user namespace, so the command keeps agentkit's uid (root stays root, owner of root's files)
  and there is no private /tmp to size-cap.

The launcher becomes a child subreaper, so processes that escape the process group are still
killed when the command ends or when it receives SIGTERM/SIGINT/SIGHUP.
"""

from __future__ import annotations

import ctypes
import json
import platform
from collections.abc import Sequence
from pathlib import Path

from apps.engine.sandbox.common import DEVICE_FILES, BackendProbe
from apps.engine.sandbox.exposure import sandbox_python

_LANDLOCK_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
# audit arch, socket(2), io_uring_setup(2); x86_64 also refuses every x32 system call.
_SECCOMP = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}


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


def probe_landlock() -> BackendProbe:
    abi = landlock_abi()
    if abi <= 0:
        return BackendProbe("landlock", False, "Landlock not supported or disabled in this kernel")
    if abi < 4:
        return BackendProbe(
            "landlock",
            False,
            f"Landlock ABI {abi}: files only; ABI >= 4 (Linux 6.7) is needed to deny TCP",
        )
    if platform.machine() not in _SECCOMP:
        return BackendProbe("landlock", False, f"no seccomp socket filter for {platform.machine()}")
    return BackendProbe("landlock", True, f"Landlock ABI {abi} + seccomp socket filter")


# Run as `python -I -S -c LAUNCHER SPEC_JSON COMMAND...`. Stdlib-only and small: it starts per
# command.
LAUNCHER = r"""
import ctypes, json, os, signal, sys, time
spec = json.loads(sys.argv[1]); argv = sys.argv[2:]
libc = ctypes.CDLL(None, use_errno=True)
def check(ret, what):
    if ret < 0:
        err = ctypes.get_errno()
        sys.stderr.write("sandbox: %s failed: %s\n" % (what, os.strerror(err))); os._exit(125)
    return ret
def under(path, parent):
    return path == parent or path.startswith(parent.rstrip("/") + "/")
def seccomp():
    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]
    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(SockFilter))]
    bpf = spec["bpf"]
    prog = (SockFilter * len(bpf))(*[SockFilter(*ins) for ins in bpf])
    check(libc.prctl(22, 2, ctypes.byref(SockFprog(len(bpf), prog)), 0, 0), "seccomp")
def confine():
    check(libc.prctl(38, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    abi = spec["abi"]
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
    hidden = spec["hidden"]
    def allow_tree(path, rights):
        # Everything below `path` except the hidden paths: descend where one hides.
        if any(under(path, h) for h in hidden):
            return
        if not any(under(h, path) for h in hidden) or not os.path.isdir(path) or os.path.islink(path):
            allow(path, rights); return
        allow(path, 8 if rights & 8 else 0)  # list the folder, read its other entries
        for name in os.listdir(path):
            allow_tree(path.rstrip("/") + "/" + name, rights)
    for path in spec["read"]: allow_tree(path, read)
    # /proc minus /proc/<pid>: Landlock does not stop reading another process's environ there.
    for entry in os.listdir("/proc"):
        if not entry.isdigit() and not os.path.islink("/proc/" + entry):
            allow("/proc/" + entry, read)
    for path in spec["devices"]: allow(path, 1 | 2 | 4 | (1 << 15 if abi >= 5 else 0))
    for path in spec["write"]: allow(path, fs)
    check(libc.syscall(ctypes.c_long(nr[2]), ctypes.c_int(rs), ctypes.c_uint32(0)), "landlock_restrict_self")
    os.close(rs)
    if spec["bpf"]:
        seccomp()
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


def socket_filter(*, deny_net: bool) -> list[tuple[int, int, int, int]]:
    """A seccomp BPF program: socket(2) for AF_UNIX (and AF_INET/AF_INET6 when `deny_net`) and
    io_uring_setup(2) fail with EACCES; on x86_64 x32 system calls and other ABIs fail too."""
    arch, nr_socket, nr_uring = _SECCOMP[platform.machine()]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, RET|K
    allow, deny = 0x7FFF0000, 0x00050000 | 13  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EACCES
    prog: list[tuple[int, str | None, str | None, int]] = [
        (ld, None, None, 4),  # seccomp_data.arch
        (jeq, None, "deny", arch),
        (ld, None, None, 0),  # seccomp_data.nr
    ]
    if platform.machine() == "x86_64":
        prog.append((jge, "deny", None, 0x40000000))  # x32 ABI
    prog += [(jeq, "deny", None, nr_uring), (jeq, None, "allow", nr_socket)]
    prog.append((ld, None, None, 16))  # seccomp_data.args[0], low 32 bits: the address family
    for family in [1] + ([2, 10] if deny_net else []):  # AF_UNIX, AF_INET, AF_INET6
        prog.append((jeq, "deny", None, family))
    prog += [(ret, None, None, allow), (ret, None, None, deny)]
    labels = {"allow": len(prog) - 2, "deny": len(prog) - 1}
    out = []
    for i, (code, jt, jf, k) in enumerate(prog):
        out.append((code, labels[jt] - i - 1 if jt else 0, labels[jf] - i - 1 if jf else 0, k))
    return out


def launcher_argv(
    argv: Sequence[str],
    *,
    abi: int,
    read: Sequence[Path],
    hidden: Sequence[Path],
    write: Sequence[Path],
    network: bool,
    sockets: bool = True,
) -> list[str]:
    """`sockets=False` leaves socket(2) alone (the Landlock layer inside a namespace backend,
    which already hides the host's sockets and network)."""
    spec = {
        "abi": abi,
        "syscalls": list(_LANDLOCK_SYSCALLS.get(platform.machine(), (0, 0, 0))),
        "deny_net": not network,
        "devices": list(DEVICE_FILES),
        "read": [str(p) for p in read],
        "hidden": [str(p) for p in hidden],
        "write": [str(p) for p in write],
        "bpf": socket_filter(deny_net=not network) if sockets else [],
    }
    return [str(sandbox_python()), "-I", "-S", "-c", LAUNCHER, json.dumps(spec), *argv]
