"""What a command may see: the system read-only (minus secrets in /etc), its workspace
read-write, a private /tmp, and read-only the tool-chains it needs (agentkit's Python and venv,
`sandbox.readable`; a workspace's own `.venv` is inside the workspace). Nothing else: not the
agentkit installation (its `.secret_key`, database, `var/` with every other workspace, source
tree), not /root or /home, not /run or the host /tmp.

The namespace backends build a new root from these lists (bwrap.py, unshare.py); Landlock turns
the same lists into read and write allow-lists (landlock.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Shown read-only (those that exist; a symlink such as /bin -> usr/bin stays a symlink).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Hidden even inside the system paths: password hashes, sudo rules, host keys, private TLS keys.
HIDDEN_PATHS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/security/opasswd",
    "/etc/krb5.keytab",
    "/etc/pip.conf",
    "/etc/npmrc",
)


def agentkit_root() -> Path:
    """The agentkit checkout this code runs from (apps/engine/sandbox/ is three levels down)."""
    return Path(__file__).resolve().parents[3]


def under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def python_paths() -> list[Path]:
    """Directories the agentkit interpreter needs: its venv and its base Python install, links
    resolved (a new root shows real folders only, at their real paths)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent}
    return sorted({p.resolve() for p in paths if p.exists()})


def sandbox_python() -> Path:
    """agentkit's interpreter as a command sees it: in its venv's real folder (a venv reached
    through a symbolic link is shown at its real path, python_paths()), under the interpreter's
    own name. Resolving the interpreter itself would leave the venv: bin/python is a link to the
    base Python, and the venv is found from the path it is started by."""
    executable = Path(sys.executable)
    return Path(os.path.realpath(executable.parent)) / executable.name


@dataclass(frozen=True)
class Exposure:
    """The file-system view of one command. `installation_root` is the agentkit installation to
    hide (default: this checkout); its venv may still be shown, nothing else of it."""

    installation_root: Path = field(default_factory=agentkit_root)
    readable: tuple[Path, ...] = ()  # extra read-only paths (sandbox.readable)
    hidden: tuple[Path, ...] = ()  # extra hidden paths (sandbox.hidden)

    def hidden_paths(self) -> list[Path]:
        return [Path(p) for p in HIDDEN_PATHS] + list(self.hidden)

    def system_paths(self) -> list[Path]:
        return [Path(p) for p in SYSTEM_PATHS if os.path.lexists(p)]

    def check_path(self, path: Path, what: str) -> None:
        """Refuse a shown path that would expose the installation: the installation itself, a
        folder above it, or its `var/` (also $AGENTKIT_VAR_DIR); a workspace below
        var/workspaces/ is fine."""
        root = self.installation_root
        protected = [root, root / "var", root / "var" / "workspaces"]
        if os.environ.get("AGENTKIT_VAR_DIR"):  # the server's var/ may live elsewhere
            var = Path(os.environ["AGENTKIT_VAR_DIR"]).resolve()
            protected += [var, var / "workspaces"]
        for hidden in protected:
            if under(hidden, path):
                raise ValueError(
                    f"sandbox: {what} {path} contains {hidden}, part of the agentkit "
                    "installation (its secret key, database and every workspace); use a "
                    "directory outside it"
                )

    def toolchains(self, cwd: Path) -> list[Path]:
        """Read-only tool-chain paths for a command in `cwd`, those that are safe to show. Never
        taken from the workspace (a repository's `.venv` symlink or `pyvenv.cfg` could name any
        folder): a workspace `.venv` inside it is visible anyway, its base Python when it is
        agentkit's or a system one; any other goes in `sandbox.readable`."""
        out = []
        for path in [*python_paths(), *self.readable]:
            path = Path(path).resolve()
            try:
                self.check_path(path, "tool-chain path")
            except ValueError:
                continue  # a folder above the installation: not shown
            if under(path, self.installation_root / "var") and not under(path, cwd):
                continue  # e.g. the venv of another workspace
            if not any(under(path, system) for system in self.system_paths()):
                out.append(path)
        out = sorted(set(out), key=lambda p: (len(p.parts), str(p)))
        return [p for i, p in enumerate(out) if not any(under(p, q) for q in out[:i])]

    def validate_writable(self, paths: Sequence[Path]) -> None:
        for path in paths:
            self.check_path(path, "writable path")
