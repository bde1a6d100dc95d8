"""The unshare backend (util-linux), for machines without bubblewrap: the same new root as
bwrap, built by a shell script that runs as root of a fresh user namespace (mount, pid, ipc, uts
and network namespaces too): a tmpfs root, the shown paths bound into it (read-only where they
should be), /etc secrets masked, a size-capped /tmp, a minimal /dev, a fresh /proc, then
pivot_root and the old root detached. The command then runs in a nested user namespace as uid/gid
1000 (mapped to agentkit's uid outside) with no capabilities and no_new_privs."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from apps.engine.sandbox.common import (
    SANDBOX_UID,
    SYSTEM_PATH,
    BackendProbe,
    SandboxUnavailable,
)
from apps.engine.sandbox.exposure import Exposure, under
from apps.engine.sandbox.probing import try_argv

# Arguments: new root mountpoint, working dir, /tmp size in MB, the directories and the files to
# create in the new root (newline-separated, each one argument), then entries `ro PATH`,
# `rw PATH`, `sym TARGET PATH`, `hide PATH` (shallow first), "--", the command. Few processes:
# every one started here adds to each command's start-up time.
_SETUP = r"""
set -eu
root=$1 workdir=$2 tmpsize=$3
fail() { echo "sandbox: $*" >&2; exit 125; }
readonly_bind() {  # keep the flags the kernel locks in a user namespace (nosuid, nodev...)
  for extra in "" ",nosuid" ",nodev" ",nosuid,nodev" ",nosuid,nodev,noexec"; do
    mount -o "remount,bind,ro$extra" "$1" 2>/dev/null && return 0
  done
  fail "cannot make $1 read-only"
}
mount -t tmpfs -o mode=0755 agentkit-root "$root" || fail "cannot mount the new root"
mkdir -p "$root/tmp" "$root/proc" "$root/dev/shm"
mount -t tmpfs -o "mode=1777,size=${tmpsize}m" tmpfs "$root/tmp"
mount -t tmpfs -o mode=1777,size=64m tmpfs "$root/dev/shm"
set -f
IFS='
'
mkdir -p -m 0755 $4
touch $5
IFS=' '
set +f
shift 5
mkdir -m 0700 "$root/tmp/home"
for dev in null zero full random urandom tty; do
  mount --bind "/dev/$dev" "$root/dev/$dev"
done
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mount -t proc proc "$root/proc" || fail "cannot mount /proc"
while [ "$1" != "--" ]; do
  kind=$1 path=$2
  shift 2
  case $kind in
    sym)
      target=$path path=$1
      shift
      ln -s "$target" "$root$path" ;;
    ro|rw)
      mount --bind "$path" "$root$path" || fail "cannot show $path"
      if [ "$kind" = ro ]; then readonly_bind "$root$path"; fi ;;
    hide)
      if [ -d "$root$path" ] && [ ! -L "$root$path" ]; then
        mount -t tmpfs -o ro,mode=0755 tmpfs "$root$path"
      elif [ -e "$root$path" ]; then
        mount --bind /dev/null "$root$path"
      fi ;;
  esac
done
shift
cd "$root"
mkdir .old-root
PIVOT_ROOT . .old-root
umount -l /.old-root
rmdir /.old-root
readonly_bind /
cd "$workdir"
# Not exec: this shell (pid 1) reports a death by signal N as exit 128 + N; util-linux 2.38's
# `unshare --fork` would fail re-raising it ("sigprocmask unblock failed").
UNSHARE --user --map-user=UID --map-group=UID -- \
  SETPRIV --no-new-privs --inh-caps=-all --ambient-caps=-all -- "$@"
"""


def _binary(name: str) -> str:
    return shutil.which(name, path=SYSTEM_PATH) or name


def setup_script() -> str:
    script = _SETUP.replace("UID", str(SANDBOX_UID)).replace("PIVOT_ROOT", _binary("pivot_root"))
    return script.replace("UNSHARE", _binary("unshare")).replace("SETPRIV", _binary("setpriv"))


def unshare_argv(
    argv: Sequence[str],
    *,
    root: Path,
    cwd: Path,
    writable: Sequence[Path],
    network: bool,
    exposure: Exposure,
    tmp_size_mb: int,
) -> list[str]:
    """`root`: an empty directory to mount the new root on (a private mount, gone afterwards)."""
    out = [_binary("unshare"), "--user", "--map-root-user", "--mount", "--propagation", "private"]
    out += ["--pid", "--fork", "--kill-child", "--ipc", "--uts"]
    if not network:
        out.append("--net")
    entries: list[tuple[int, list[str]]] = []
    for path in exposure.system_paths():
        if path.is_symlink():
            entries.append((1, ["sym", str(path.readlink()), str(path)]))
        else:
            entries.append((1, ["ro", str(path)]))
    for path in exposure.toolchains(cwd):
        entries.append((len(path.parts), ["ro", str(path)]))
    for path in writable:
        entries.append((len(path.parts), ["rw", str(path)]))
    if not any(under(cwd, path) for path in writable):
        entries.append((len(cwd.parts), ["ro", str(cwd)]))
    shown = exposure.system_paths()
    for path in exposure.hidden_paths():
        if any(under(path, system) for system in shown):
            entries.append((99, ["hide", str(path)]))
    ordered = [words for _, words in sorted(entries, key=lambda e: e[0])]
    spec = [word for words in ordered for word in words]
    # What the entries mount on, made in one mkdir and one touch: a bind's mountpoint (or a
    # symlink's folder), unless it lies inside an earlier bind, where it exists already.
    binds = [Path(words[1]) for words in ordered if words[0] in ("ro", "rw")]
    dirs, files = (
        [],
        [f"{root}/dev/{d}" for d in ("null", "zero", "full", "random", "urandom", "tty")],
    )
    for words in ordered:
        if words[0] == "hide":
            continue
        path = Path(words[-1])
        if any(under(path, bind) and path != bind for bind in binds):
            continue
        if words[0] == "sym" or not path.is_dir():
            dirs.append(f"{root}{path.parent}")
            if words[0] != "sym":
                files.append(f"{root}{path}")
        else:
            dirs.append(f"{root}{path}")
    if any("\n" in word for word in spec):
        raise SandboxUnavailable("sandbox: a path with a newline cannot be shown to a command")
    script = [
        "/bin/sh",
        "-c",
        setup_script(),
        "agentkit-sandbox",
        str(root),
        str(cwd),
        str(tmp_size_mb),
        "\n".join(dirs),
        "\n".join(files),
    ]
    return [*out, "--", *script, *spec, "--", *argv]


def probe_unshare() -> BackendProbe:
    missing = [
        n for n in ("unshare", "setpriv", "pivot_root") if not shutil.which(n, path=SYSTEM_PATH)
    ]
    if missing:
        return BackendProbe("unshare", False, f"{' and '.join(missing)} not found (util-linux)")
    probe_dir = Path(tempfile.mkdtemp(prefix="agentkit-probe-"))
    try:
        (probe_dir / "root").mkdir()
        (probe_dir / "ws").mkdir()
        argv = unshare_argv(
            ["/bin/true"],
            root=probe_dir / "root",
            cwd=probe_dir / "ws",
            writable=[probe_dir / "ws"],
            network=False,
            exposure=Exposure(),
            tmp_size_mb=8,
        )
        ok, detail = try_argv(argv)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    binary = shutil.which("unshare", path=SYSTEM_PATH)
    return BackendProbe("unshare", ok, f"{binary}: {detail}" if ok else f"{binary} fails: {detail}")
