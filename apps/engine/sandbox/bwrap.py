"""The bubblewrap backend: a new root built only from what the command needs (system paths
read-only with /etc secrets masked, tool-chains read-only, the writable paths, a size-capped
tmpfs /tmp, a minimal /dev, a fresh /proc); new user, network, pid, ipc and uts namespaces; the
command runs as uid/gid 1000 with no capabilities (mapped to agentkit's uid outside); dies with
its parent."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from apps.engine.sandbox.common import SANDBOX_UID, SYSTEM_PATH, BackendProbe
from apps.engine.sandbox.exposure import Exposure, under
from apps.engine.sandbox.probing import try_argv


def bwrap_argv(
    binary: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    writable: Sequence[Path],
    network: bool,
    exposure: Exposure,
    tmp_size_mb: int,
) -> list[str]:
    out = [binary, "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    for path in exposure.system_paths():
        if path.is_symlink():  # /bin -> usr/bin on merged-/usr systems
            out += ["--symlink", os.readlink(path), str(path)]
        else:
            out += ["--ro-bind", str(path), str(path)]
    for path in exposure.hidden_paths():
        if not any(under(path, system) for system in exposure.system_paths()):
            continue  # not shown anyway
        if path.is_dir() and not path.is_symlink():
            out += ["--perms", "0755", "--tmpfs", str(path), "--remount-ro", str(path)]
        elif path.exists():
            out += ["--ro-bind", "/dev/null", str(path)]
    out += ["--dev", "/dev", "--proc", "/proc"]
    out += ["--perms", "1777", "--size", str(tmp_size_mb << 20), "--tmpfs", "/tmp"]
    # Shallow paths first, so a deeper bind lands inside the one above it.
    binds = [("--ro-bind", path) for path in exposure.toolchains(cwd)]
    binds += [("--bind", path) for path in writable]
    if not any(under(cwd, path) for path in writable):
        binds.append(("--ro-bind", cwd))  # a working directory that is not writable
    for option, path in sorted(binds, key=lambda bind: len(bind[1].parts)):
        out += [option, str(path), str(path)]
    out += ["--perms", "0700", "--dir", "/tmp/home", "--remount-ro", "/"]
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


def probe_bwrap() -> BackendProbe:
    binary = shutil.which("bwrap", path=SYSTEM_PATH)
    if not binary:
        return BackendProbe("bwrap", False, "bwrap not found on PATH")
    probe_dir = tempfile.mkdtemp(prefix="agentkit-probe-")
    try:
        argv = bwrap_argv(
            binary,
            ["/bin/true"],
            cwd=Path(probe_dir),
            writable=[Path(probe_dir)],
            network=False,
            exposure=Exposure(),
            tmp_size_mb=8,
        )
        ok, detail = try_argv(argv)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    return BackendProbe("bwrap", ok, f"{binary}: {detail}" if ok else f"{binary} fails: {detail}")
