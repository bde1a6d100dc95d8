"""Run a probe command once, synchronously, with a bare environment."""

from __future__ import annotations

import subprocess

from apps.engine.sandbox.common import SYSTEM_PATH


def try_argv(argv: list[str]) -> tuple[bool, str]:
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
