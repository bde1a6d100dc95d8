"""The git CLI for repository workspaces (repositories.py, worktrees.py, handoffs.py): every call
bounded in time, never prompting (`GIT_TERMINAL_PROMPT=0`, ssh in batch mode), with no user or
system configuration (hooks, credential helpers, templates, signing), and every text it returns
redacted: a URL's userinfo (`https://user:token@host`) and the push credential never reach an
event, a log line or an error message.

Push credentials are named by admins (`Workspace.push_credential_env`: an environment variable
of the server): an https remote gets the variable's value as a bearer token through git's
environment-provided configuration (`GIT_CONFIG_*`, never the command line, never disk); an ssh
remote gets it as the path of a private key.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_SECONDS = 60.0
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")
# Identity of every commit agentkit makes (the committer is set per call: the requesting user).
AUTHOR_NAME = "agentkit"
AUTHOR_EMAIL = "agentkit@localhost"


class GitError(RuntimeError):
    """A git command failed or timed out; `output` is its redacted stderr/stdout."""

    def __init__(self, message: str, output: str = "", code: int | None = None):
        super().__init__(message)
        self.output, self.code = output, code


@dataclass(frozen=True)
class GitResult:
    code: int
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.code == 0


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Text without URL userinfo and without the given secret values."""
    text = _USERINFO.sub(r"\g<scheme>***@", text)
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def base_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/nonexistent"),
        "LC_ALL": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_SSH_COMMAND": "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
        "GIT_AUTHOR_NAME": AUTHOR_NAME,
        "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
        "GIT_COMMITTER_NAME": AUTHOR_NAME,
        "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
    }
    env.update(extra or {})
    return env


# Options of every call: nothing the repository configures runs code on the host.
SAFE = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "credential.helper=",
    "-c",
    "protocol.allow=never",
    "-c",
    "protocol.file.allow=always",
    "-c",
    "protocol.https.allow=always",
    "-c",
    "protocol.ssh.allow=always",
)


def run(
    args: list[str],
    cwd: Path | str | None,
    *,
    timeout: float = TIMEOUT_SECONDS,
    env: dict[str, str] | None = None,
    secrets: tuple[str, ...] = (),
    check: bool = True,
    input_text: str | None = None,
) -> GitResult:
    """Blocking: `git <args>` in `cwd`. check: a non-zero exit raises GitError."""
    command = ["git", *SAFE, *args]
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=base_env(env),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            input=input_text,
            stdin=None if input_text is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took longer than {timeout:g} s and was stopped") from None
    except OSError as exc:
        raise GitError(f"git could not run: {exc.strerror or exc}") from None
    result = GitResult(done.returncode, redact(done.stdout, secrets), redact(done.stderr, secrets))
    if check and not result.ok:
        output = (result.err or result.out).strip()
        raise GitError(f"git {args[0]} failed: {output[-2000:]}", output, result.code)
    return result


def out(args: list[str], cwd: Path | str | None, **kwargs) -> str:
    return run(args, cwd, **kwargs).out.strip()


def is_work_tree_top(path: Path) -> bool:
    """`path` is the top of a git work tree (not a directory inside one)."""
    if not (path / ".git").exists():
        return False
    try:
        top = out(["-c", "safe.directory=*", "rev-parse", "--show-toplevel"], path, timeout=15)
    except GitError:
        return False
    return Path(top).resolve() == path.resolve()


def current_branch(path: Path) -> str:
    return out(["-c", "safe.directory=*", "symbolic-ref", "--short", "HEAD"], path, timeout=15)


def credential_env(url: str, env_name: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """The environment that hands the admin-named credential to git for `url`, and the secret
    values to redact. Nothing when no variable is named or it is unset."""
    value = os.environ.get(env_name, "") if env_name else ""
    if not value:
        return {}, ()
    if url.startswith("https://"):
        basic = base64.b64encode(f"x-access-token:{value}".encode()).decode()
        header = f"Authorization: Basic {basic}"
        return (
            {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": header,
            },
            (value, basic),
        )
    key = shlex.quote(value)
    ssh = f"ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o IdentitiesOnly=yes -i {key}"
    return {"GIT_SSH_COMMAND": ssh}, (value,)
