"""One worktree per task on a repository workspace (docs/repositories.md).

An Agent, Plan & verify or Team task on a repository workspace works in its own `git worktree`
(under `<workspaces dir>/worktrees/<workspace id>/`) on a new branch `agentkit/<task id>-<slug>`
made from the base branch's current commit. Follow-up turns of the same conversation continue on
that branch, in that worktree, while it exists. A run taken over from a dead worker finds its task's
worktree (made again from its branch when the directory went). Answer turns (direct_chat) read
the base branch's checkout, the workspace's own directory.

Commits are the record: at each phase a Plan & verify or Team run passes and at the end of every
run, what changed is committed on the branch with author `agentkit`, the requesting user as
committer and the trailer `Agentkit-Task: <id>` (runner.py calls `task_commit`). `Task.commit`
is the branch's newest commit.

Housekeeping: `worktree_remove` after a merge or a discard (handoffs.py), `worktrees_expire`
(the reaper) once a finished task's worktree is older than `workspaces.worktree_ttl_days`; a new
worktree is refused while the workspace's worktrees use more than `workspaces.worktree_max_mb`.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shutil
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from apps.tasks.models import FINAL_STATUSES, Task, Workspace
from apps.tasks.vcs import git

log = logging.getLogger(__name__)

BRANCH_PREFIX = "agentkit/"
TRAILER = "Agentkit-Task"
# What a run leaves behind that is never part of its work (the repository's own .gitignore
# applies too): caches of the tools and tests it ran.
NOT_COMMITTED = (
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".venv",
)
PATHSPEC = (
    ".",
    *(f":(exclude,glob)**/{name}" for name in NOT_COMMITTED),
    *(f":(exclude,glob)**/{name}/**" for name in NOT_COMMITTED),
)


class WorktreeRefused(Exception):
    """A worktree that cannot be made; carries an error code and a message that says why."""

    def __init__(self, error_code: str, message: str):
        super().__init__(message)
        self.error_code = error_code


def slug(goal: str, limit: int = 40) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", goal.lower()).strip("-")
    return words[:limit].strip("-") or "task"


def branch_name(task: Task) -> str:
    return f"{BRANCH_PREFIX}{task.pk}-{slug(task.goal)}"


def worktrees_dir(workspace: Workspace) -> Path:
    return Path(settings.AGENTKIT_WORKSPACES_DIR) / "worktrees" / str(workspace.pk)


def task_root(task: Task) -> Path:
    """Where the task reads and edits: its worktree, else the workspace's directory."""
    return Path(task.worktree) if task.worktree else Path(task.workspace.root_dir)


@contextmanager
def repository_lock(root: Path | str):
    """One git writer on a repository's shared refs at a time (worktree add, merge), across
    threads and processes of this machine."""
    locks = Path(settings.AGENTKIT_WORKSPACES_DIR) / "worktrees" / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:32]
    with open(locks / f"{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def timeout_of(config) -> float:
    return float(config.workspaces.git_timeout_seconds)


def _exists(root: str, ref: str, timeout: float) -> bool:
    return git.run(["rev-parse", "-q", "--verify", ref], root, check=False, timeout=timeout).ok


def disk_used_mb(workspace: Workspace) -> float:
    total = 0
    for dirpath, _dirs, files in os.walk(worktrees_dir(workspace)):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total / (1024 * 1024)


def _continued(task: Task, root: str, timeout: float) -> Task | None:
    """The conversation's latest earlier turn with a branch, when this turn continues it: its
    branch still exists (not discarded) and is not merged into the base yet."""
    if task.conversation_id is None:
        return None
    earlier = (
        Task.objects.filter(conversation_id=task.conversation_id, pk__lt=task.pk)
        .exclude(branch="")
        .order_by("-pk")
        .first()
    )
    if earlier is None or not _exists(root, f"refs/heads/{earlier.branch}", timeout):
        return None
    base = f"refs/heads/{task.workspace.base_branch}"
    merged = git.run(
        ["merge-base", "--is-ancestor", f"refs/heads/{earlier.branch}", base],
        root,
        check=False,
        timeout=timeout,
    ).ok
    return None if merged else earlier


def task_worktree_ensure(task: Task, config) -> Path:
    """Blocking: the task's worktree, made when it has none (sets `branch`, `base_commit`,
    `worktree`, `commit` on the row and on `task`). Raises WorktreeRefused."""
    workspace = task.workspace
    root, timeout = workspace.root_dir, timeout_of(config)
    try:
        with repository_lock(root):
            if task.branch and task.worktree and Path(task.worktree).is_dir():
                return Path(task.worktree)  # a run taken over: its worktree as it left it
            if task.branch and _exists(root, f"refs/heads/{task.branch}", timeout):
                path = Path(
                    task.worktree or worktrees_dir(workspace) / f"{task.pk}-{slug(task.goal)}"
                )
                git.run(["worktree", "prune"], root, timeout=timeout)
                git.run(
                    ["worktree", "add", "--quiet", str(path), task.branch], root, timeout=timeout
                )
                _store(task, task.branch, task.base_commit, path, root, timeout)
                return path
            earlier = _continued(task, root, timeout)
            if earlier is not None:  # a follow-up turn: the same branch, the same worktree
                if earlier.worktree and Path(earlier.worktree).is_dir():
                    path = Path(earlier.worktree)
                else:  # its worktree expired or was removed: made again from the branch
                    path = worktrees_dir(workspace) / f"{task.pk}-{slug(task.goal)}"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    git.run(["worktree", "prune"], root, timeout=timeout)
                    git.run(
                        ["worktree", "add", "--quiet", str(path), earlier.branch],
                        root,
                        timeout=timeout,
                    )
                _store(task, earlier.branch, earlier.base_commit, path, root, timeout)
                return path
            cap = config.workspaces.worktree_max_mb
            used = disk_used_mb(workspace)
            if used > cap:
                raise WorktreeRefused(
                    "disk_cap",
                    f"the worktrees of workspace {workspace.name} use {used:.0f} MB, over "
                    f"workspaces.worktree_max_mb ({cap} MB): merge or discard finished tasks' "
                    "branches, or ask an admin to raise the cap",
                )
            base = workspace.base_branch
            base_commit = git.out(["rev-parse", "--verify", f"refs/heads/{base}^{{commit}}"], root)
            branch = branch_name(task)
            path = worktrees_dir(workspace) / f"{task.pk}-{slug(task.goal)}"
            path.parent.mkdir(parents=True, exist_ok=True)
            git.run(
                ["worktree", "add", "--quiet", "-b", branch, str(path), base_commit],
                root,
                timeout=timeout,
            )
            _store(task, branch, base_commit, path, root, timeout)
            return path
    except git.GitError as exc:
        raise WorktreeRefused(
            "worktree_failed", f"the task's worktree could not be made: {exc}"
        ) from None


def _store(task: Task, branch: str, base_commit: str, path: Path, root: str, timeout) -> None:
    head = git.out(["rev-parse", f"refs/heads/{branch}"], root, timeout=timeout)
    fields = {"branch": branch, "base_commit": base_commit, "worktree": str(path), "commit": head}
    Task.objects.filter(pk=task.pk).update(**fields)
    for name, value in fields.items():
        setattr(task, name, value)


def committer_env(user) -> dict[str, str]:
    name = (user.get_full_name() or user.get_username()) if user is not None else "agentkit"
    email = (
        (getattr(user, "email", "") or f"{user.get_username()}@agentkit.invalid")
        if user
        else (git.AUTHOR_EMAIL)
    )
    return {"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}


def task_commit(task: Task, message: str, config, user=None) -> str | None:
    """Blocking: commit what changed in the task's worktree on its branch (author agentkit,
    committer the requesting user — `user`, else the task's — trailer `Agentkit-Task: <id>`).
    Returns the new commit, or None when nothing changed. `Task.commit` follows the branch's
    newest commit either way."""
    if not task.worktree or not Path(task.worktree).is_dir():
        return None
    with repository_lock(task.workspace.root_dir):  # a Team checkpoint and a phase's commit
        return _commit(task, message, config, user)


def worktree_env(task: Task, timeout: float) -> dict[str, str]:
    """GIT_DIR and GIT_WORK_TREE for host-side git in a task's worktree. The worktree is the
    model's to write, its `.git` file included: git on the host never follows that file (a
    `.git` pointing at a directory of the model's making would bring its own configuration, and
    a filter driver there would run on the host); it uses the repository's own administrative
    directory of the worktree, checked to belong to it."""
    common = git.out(
        ["rev-parse", "--path-format=absolute", "--git-common-dir"],
        task.workspace.root_dir,
        timeout=timeout,
    )
    path = Path(task.worktree)
    admin = Path(common) / "worktrees" / path.name
    try:
        points_at = Path((admin / "gitdir").read_text().strip())
    except OSError:
        points_at = None
    if points_at is None or points_at.parent.resolve() != path.resolve():
        raise git.GitError(f"{path.name} is not a worktree of the workspace's repository")
    return {"GIT_DIR": str(admin), "GIT_WORK_TREE": str(path)}


def _commit(task: Task, message: str, config, user) -> str | None:
    path, timeout = task.worktree, timeout_of(config)
    env = worktree_env(task, timeout)
    git.run(["add", "-A", "--", *PATHSPEC], path, timeout=timeout, env=env)
    changed = not git.run(
        ["diff", "--cached", "--quiet"], path, check=False, timeout=timeout, env=env
    ).ok
    made = None
    if changed:
        title = " ".join(message.split())[:72] or f"agentkit task {task.pk}"
        body = f"{title}\n\n{message.strip()}\n\n{TRAILER}: {task.pk}\n"
        git.run(
            ["commit", "--quiet", "--no-verify", "-F", "-"],
            path,
            timeout=timeout,
            env={**env, **committer_env(user or task.user)},
            input_text=body,
        )
        made = git.out(["rev-parse", "HEAD"], path, timeout=timeout, env=env)
    head = git.out(["rev-parse", "HEAD"], path, timeout=timeout, env=env)
    Task.objects.filter(branch=task.branch, workspace_id=task.workspace_id).exclude(
        commit=head
    ).filter(pk__gte=task.pk).update(commit=head)
    task.commit = head
    return made


def worktree_remove(task: Task, config, *, delete_branch: bool = False) -> None:
    """Blocking: remove the task's worktree (and its branch with `delete_branch`); every task of
    the branch forgets the worktree."""
    root, timeout = task.workspace.root_dir, timeout_of(config)
    with repository_lock(root):
        if task.worktree:
            if Path(task.worktree).exists():
                result = git.run(
                    ["worktree", "remove", "--force", task.worktree],
                    root,
                    check=False,
                    timeout=timeout,
                )
                if not result.ok:
                    shutil.rmtree(task.worktree, ignore_errors=True)
            git.run(["worktree", "prune"], root, check=False, timeout=timeout)
        if delete_branch and task.branch:
            git.run(["branch", "-D", task.branch], root, check=False, timeout=timeout)
    Task.objects.filter(workspace_id=task.workspace_id, branch=task.branch).update(worktree="")
    task.worktree = ""


def worktrees_expire(config, now=None) -> list[int]:
    """Blocking (the reaper): remove the worktrees of tasks that ended more than
    `workspaces.worktree_ttl_days` ago and whose branch no unfinished task works on. Their
    branches stay (merge, push, patch and discard still work). Returns the tasks' ids."""
    cutoff = (now or timezone.now()) - timedelta(days=config.workspaces.worktree_ttl_days)
    old = (
        Task.objects.select_related("workspace", "user")
        .filter(status__in=FINAL_STATUSES, finished_at__lt=cutoff)
        .exclude(worktree="")
        .order_by("pk")[:50]
    )
    done = []
    for task in old:
        busy = Task.objects.filter(workspace_id=task.workspace_id, branch=task.branch).exclude(
            status__in=FINAL_STATUSES
        )
        if busy.exists():
            continue
        try:
            worktree_remove(task, config)
        except (git.GitError, OSError):
            log.warning("the worktree of task %s could not be removed", task.pk, exc_info=True)
            continue
        done.append(task.pk)
    return done
