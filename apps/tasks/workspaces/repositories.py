"""Repository workspaces (docs/repositories.md): a workspace that is a git repository, its base
branch recorded. Registered from a git work tree under `workspaces.allowed_roots`
(workspaces.workspace_create_from_directory), or cloned from a URL (`POST /api/workspaces`
{"name", "git_url", "branch"?}).

Clone URLs are a trust boundary: `file://` only under `workspaces.allowed_roots`, `https://` and
`ssh://` (or `user@host:path`); nothing else (no `ext::`, no `git://`, no bare local paths, no
option-like values). A URL carrying a password (or, but for ssh's user name, any userinfo: a
token is often given as the user name) is refused: credentials are set by admins as the
name of an environment variable (`Workspace.push_credential_env`), never typed into a URL that
would be stored. Every git message that reaches the user is redacted (git.py).
"""

from __future__ import annotations

import re
import secrets
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from apps.tasks.errors import ApplicationError
from apps.tasks.models import Workspace
from apps.tasks.services import workspace_create
from apps.tasks.vcs import git

_SCP = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!//)[^\s]+$")
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]{1,200}(?<![./])$")


def _refuse(message: str, code: str = "invalid_workspace") -> ApplicationError:
    return ApplicationError(message, {"error_code": code})


def check_branch_name(branch: object) -> str:
    if not isinstance(branch, str) or not _BRANCH.match(branch) or branch.endswith(".lock"):
        raise _refuse("'branch' must be a branch name such as main or release/2.0", "invalid_field")
    return branch


def _under(path: Path, roots: list[str]) -> bool:
    real = path.resolve()
    return any(real.is_relative_to(Path(root).resolve()) for root in roots)


def check_clone_url(url: object, allowed_roots: list[str]) -> str:
    """The URL as git will get it, or a refusal that says which URLs are accepted."""
    if not isinstance(url, str) or not url.strip() or len(url) > 1000:
        raise _refuse("give 'git_url': an https://, ssh:// or file:// URL", "missing_field")
    url = url.strip()
    if url.startswith("-") or any(ch in url for ch in "\n\r\t "):
        raise _refuse("'git_url' is not a URL", "invalid_field")
    if _SCP.match(url):  # git@host:owner/repo.git
        return url
    parts = urlsplit(url)
    if parts.scheme not in ("https", "ssh", "file"):
        raise _refuse(
            "'git_url' must be an https://, ssh:// (or user@host:path) or file:// URL",
            "invalid_field",
        )
    if parts.password is not None or (parts.scheme != "ssh" and parts.username is not None):
        raise _refuse(
            "'git_url' carries credentials: give the URL without them; an admin sets the "
            "credential as an environment variable (the workspace's push credential)",
            "invalid_field",
        )
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise _refuse("a file:// URL names a path on this server", "invalid_field")
        if not allowed_roots or not _under(Path(parts.path), allowed_roots):
            raise _refuse(
                "a file:// URL must point inside workspaces.allowed_roots "
                f"({', '.join(allowed_roots) or 'none set'})",
                "not_allowed",
            )
    elif not parts.hostname:
        raise _refuse("'git_url' has no host", "invalid_field")
    return url


def workspace_clone(
    *, user, name: str, git_url: object, branch: object, config, workspaces_dir: Path
) -> Workspace:
    """Blocking (up to `workspaces.clone_timeout_seconds`): clone the repository into the
    server's workspaces directory and record its base branch (the given one, else the remote's
    default). A failed clone leaves nothing behind; its message is redacted. `name` is
    checked by the caller (workspaces.workspace_create_from_git)."""
    limits = config.workspaces
    url = check_clone_url(git_url, limits.allowed_roots)
    if branch not in (None, ""):
        branch = check_branch_name(branch)
    repos = Path(workspaces_dir) / "repos"
    repos.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^\w.-]+", "-", name).strip("-") or "repo"
    dest = repos / f"{slug}-{secrets.token_hex(4)}"
    args = ["clone", "--quiet", "--no-recurse-submodules"]
    if branch:
        args += ["--branch", branch]
    try:
        git.run(
            [*args, "--", url, str(dest)], None, timeout=limits.clone_timeout_seconds, secrets=()
        )
        base = branch or git.current_branch(dest)
        ws = workspace_create(name=name, root_dir=dest, members=[user])
    except git.GitError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise _refuse(f"the repository could not be cloned: {exc}", "clone_failed") from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    Workspace.objects.filter(pk=ws.pk).update(base_branch=base, git_url=git.redact(url))
    ws.base_branch, ws.git_url = base, git.redact(url)
    return ws


def repository_base(directory: Path) -> str:
    """The base branch of a git work tree registered as a workspace ("" when `directory` is no
    work tree's top, or its HEAD is detached: a plain directory then)."""
    if not git.is_work_tree_top(directory):
        return ""
    try:
        return git.current_branch(directory)
    except git.GitError:
        return ""
