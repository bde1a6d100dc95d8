"""What every part of the sandbox shares: names, results, errors, the secret-name rule."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

BackendName = Literal["bwrap", "unshare", "landlock"]
BACKENDS: tuple[BackendName, ...] = ("bwrap", "unshare", "landlock")
UNCONFINED = "none"

# What a backend may hold; `sandbox.require` names the ones that must (see properties.py).
PROPERTIES: tuple[str, ...] = (
    "no_network",  # no TCP/UDP to anywhere, loopback included
    "read_only_host",  # writes outside the workspace (and the private /tmp) are refused
    "hidden_host_files",  # installation secrets/database/var, other workspaces, homes, /etc/shadow
    "no_host_sockets",  # no Unix socket of the host (/run, /var/run, the host /tmp, abstract)
    "unprivileged_user",  # the command runs as a non-root uid with no capabilities
    "limits",  # processes, address space, CPU time, file size and /tmp size are capped
    "clean_environment",  # only PATH, HOME, TMPDIR, LANG... and no secret reach the command
    "tree_kill",  # at the timeout the command and every descendant are killed
)

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
# The unprivileged uid/gid commands run as inside the namespace backends (mapped to agentkit's
# own uid outside, so the files a command creates stay owned by, and editable for, agentkit).
SANDBOX_UID = 1000

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
URL_WITH_PASSWORD = re.compile(r"://[^/@\s]*:[^/@\s]*@")


def is_secret_name(name: str) -> bool:
    parts = set(name.upper().replace("-", "_").split("_"))
    return bool(parts & _SECRET_PARTS) or name.upper().endswith(("APIKEY", "TOKEN", "SECRET"))


class SandboxUnavailable(RuntimeError):
    """No backend can confine commands (or hold what `sandbox.require` asks) and the
    configuration does not allow running unconfined."""


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int  # 128 + N when killed by signal N (a timeout reports -9 / 137 as it happened)
    stdout: str
    stderr: str
    duration: float
    timed_out: bool
    backend: str  # bwrap | unshare | landlock | none
    truncated: bool = False  # some output exceeded max_output_bytes and was cut in the middle
    # How memory was capped: "cgroup" (the whole tree), "rlimit" (RLIMIT_AS per process), "".
    memory_cap: str = ""
    # Non-empty when the command ran out of the memory the sandbox gives it: why, what to do.
    memory_error: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.memory_error

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


@dataclass(frozen=True)
class IsolationCheck:
    """One probe of `check_isolation` (isolation.py): a real command and what it showed."""

    name: str
    passed: bool
    detail: str
    property: str = ""
