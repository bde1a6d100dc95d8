"""The environment of a command: rebuilt from scratch, secrets dropped even when listed."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from apps.engine.sandbox.common import SYSTEM_PATH, URL_WITH_PASSWORD, is_secret_name
from apps.engine.sandbox.exposure import sandbox_python

log = logging.getLogger(__name__)


def command_environment(
    cwd: Path,
    *,
    passthrough: Sequence[str],
    home: str,
    tmp: str,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """PATH (the workspace's .venv first, agentkit's Python, the system), HOME, TMPDIR, LANG and
    a few terminal settings, plus the `passthrough` names and `extra` that are not secrets."""
    path = [str(sandbox_python().parent), SYSTEM_PATH]
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
    candidates = {n: os.environ[n] for n in passthrough if n in os.environ}
    candidates.update(extra or {})
    for name, value in candidates.items():
        if is_secret_name(name) or URL_WITH_PASSWORD.search(value):
            log.warning("sandbox: not passing %s to commands (looks like a secret)", name)
            continue
        env[name] = value
    return env
