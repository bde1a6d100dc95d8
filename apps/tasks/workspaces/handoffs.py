"""A repository task's work handed back (docs/repositories.md): what its branch changed
(`branch_changes`: base...branch files, +/−, the diff, its commits), the patch
(`task_patch`: `git format-patch` mbox that `git am` applies to a fresh clone of the base),
`task_merge` into the base branch, `task_push` to the workspace's remote, `task_discard`.

Merge computes the result without touching any working tree (`git merge-tree --write-tree`): a
merge that conflicts is refused with the conflicting files named and nothing changed; a clean one
fast-forwards the base branch or makes a merge commit, then moves the base (its checkout in the
workspace directory follows it when the base is checked out there and clean). Only the task's
owner and admins (staff) may merge, push or discard. Refusals raise HandoffRefused (409 in the
API), whose message is redacted.
"""

from __future__ import annotations

from pathlib import Path

from apps.tasks.models import FINAL_STATUSES, Task
from apps.tasks.services import ApplicationError
from apps.tasks.vcs import git
from apps.tasks.vcs.worktrees import (
    committer_env,
    repository_lock,
    timeout_of,
    worktree_remove,
)

MAX_DIFF_CHARS = 400_000
MAX_PATCH_BYTES = 20 * 1024 * 1024


class HandoffRefused(Exception):
    """A hand-off that cannot be done now: `code`, a message that says why, the files involved."""

    def __init__(self, code: str, message: str, files: list[str] | None = None):
        super().__init__(message)
        self.code, self.message, self.files = code, message, files


def _check_repository_task(task: Task) -> None:
    if not task.branch:
        raise ApplicationError(
            f"task #{task.pk} has no branch: only Agent, Plan & verify and Team tasks on a "
            "repository workspace do",
            {"error_code": "no_branch"},
        )


def _check_owner(user, task: Task) -> None:
    if task.user_id != user.pk and not (user.is_staff or user.is_superuser):
        raise ApplicationError(
            "only the task's owner or an admin can merge, push or discard its branch",
            {"error_code": "forbidden"},
        )


def _check_finished(task: Task) -> None:
    busy = Task.objects.filter(workspace_id=task.workspace_id, branch=task.branch).exclude(
        status__in=FINAL_STATUSES | {"parked"}
    )
    if busy.exists():
        raise HandoffRefused(
            "task_running",
            f"a task still works on {task.branch} (#{busy.first().pk}): wait for it to end or "
            "stop it first",
        )


def _branch_exists(task: Task, timeout: float) -> bool:
    return git.run(
        ["rev-parse", "-q", "--verify", f"refs/heads/{task.branch}"],
        task.workspace.root_dir,
        check=False,
        timeout=timeout,
    ).ok


def _require_branch(task: Task, timeout: float) -> None:
    if not _branch_exists(task, timeout):
        raise HandoffRefused(
            "branch_gone", f"the branch {task.branch} no longer exists (it was discarded)"
        )


# ── reading ─────────────────────────────────────────────────────────────────────────────────────
def branch_changes(*, task: Task, config) -> dict | None:
    """base...branch: {"base", "branch", "commit", "files": [{path, additions, deletions}],
    "diff", "commits": [{sha, subject, author, committer}], "merged", "worktree"}; None for a
    task without a branch."""
    if not task.branch:
        return None
    root, timeout = task.workspace.root_dir, timeout_of(config)
    base = task.workspace.base_branch
    payload = {
        "base": base,
        "branch": task.branch,
        "commit": task.commit,
        "exists": _branch_exists(task, timeout),
        "worktree": bool(task.worktree),
        "files": [],
        "diff": "",
        "commits": [],
        "merged": False,
    }
    if not payload["exists"]:
        return payload
    spec = f"refs/heads/{base}...refs/heads/{task.branch}"
    numstat = git.out(["diff", "--numstat", "--no-renames", spec], root, timeout=timeout)
    for line in numstat.splitlines():
        added, deleted, path = [*line.split("\t", 2), "", ""][:3]
        payload["files"].append(
            {
                "path": path,
                "additions": int(added) if added.isdigit() else 0,
                "deletions": int(deleted) if deleted.isdigit() else 0,
            }
        )
    diff = git.out(["diff", "--no-color", "--no-renames", spec], root, timeout=timeout)
    payload["diff"] = diff[:MAX_DIFF_CHARS]
    log = git.out(
        ["log", "--format=%H%x1f%s%x1f%an%x1f%cn", f"refs/heads/{base}..refs/heads/{task.branch}"],
        root,
        timeout=timeout,
    )
    for line in log.splitlines():
        sha, subject, author, committer = [*line.split("\x1f"), "", "", ""][:4]
        payload["commits"].append(
            {"sha": sha, "subject": subject, "author": author, "committer": committer}
        )
    payload["merged"] = not payload["commits"] and bool(task.commit)
    return payload


def task_patch(*, task: Task, config) -> str:
    """The branch's commits since its base commit as one `git format-patch` mbox."""
    _check_repository_task(task)
    timeout = timeout_of(config)
    _require_branch(task, timeout)
    text = git.out(
        ["format-patch", "--stdout", "--no-color", f"{task.base_commit}..refs/heads/{task.branch}"],
        task.workspace.root_dir,
        timeout=timeout,
    )
    if len(text.encode()) > MAX_PATCH_BYTES:
        raise HandoffRefused("too_large", "the patch is over 20 MB: push the branch instead")
    return text + "\n" if text else ""


# ── merge ───────────────────────────────────────────────────────────────────────────────────────
def task_merge(*, user, task: Task, config) -> dict:
    """Merge the task's branch into the base branch: fast-forward when the base did not move,
    else a merge commit; refused (nothing changed) when it conflicts, naming the files."""
    _check_repository_task(task)
    _check_owner(user, task)
    _check_finished(task)
    root, timeout = task.workspace.root_dir, timeout_of(config)
    base = task.workspace.base_branch
    with repository_lock(root):
        _require_branch(task, timeout)
        old = git.out(["rev-parse", f"refs/heads/{base}"], root, timeout=timeout)
        tip = git.out(["rev-parse", f"refs/heads/{task.branch}"], root, timeout=timeout)
        ancestor = ["merge-base", "--is-ancestor"]
        if git.run([*ancestor, tip, old], root, check=False, timeout=timeout).ok:
            raise HandoffRefused("nothing_to_merge", f"{base} already holds {task.branch}")
        if git.run([*ancestor, old, tip], root, check=False, timeout=timeout).ok:
            new, how = tip, "fast-forward"
        else:
            new, how = _merge_commit(task, user, old, tip, root, timeout), "merge commit"
        _move_base(root, base, old, new, timeout)
    worktree_remove(task, config)
    return {"ok": True, "merged": how, "base": base, "commit": new, "branch": task.branch}


def _merge_commit(task: Task, user, old: str, tip: str, root: str, timeout: float) -> str:
    merged = git.run(
        ["merge-tree", "--write-tree", "--name-only", "--no-messages", old, tip],
        root,
        check=False,
        timeout=timeout,
    )
    lines = merged.out.strip().splitlines()
    if merged.code == 1:
        files = sorted({line for line in lines[1:] if line.strip()})
        raise HandoffRefused(
            "merge_conflict",
            f"{task.workspace.base_branch} moved since task #{task.pk} began and merging "
            f"{task.branch} conflicts in {', '.join(files)}; nothing was changed. Run a "
            "follow-up task in this conversation that rebases the branch on "
            f"{task.workspace.base_branch}, then merge again.",
            files,
        )
    if not merged.ok or not lines:
        raise HandoffRefused("merge_failed", f"git could not merge: {merged.err.strip()[-500:]}")
    tree = lines[0].strip()
    message = (
        f"Merge {task.branch} into {task.workspace.base_branch}\n\n"
        f"{task.goal.strip()[:500]}\n\nAgentkit-Task: {task.pk}\n"
    )
    return git.out(
        ["commit-tree", tree, "-p", old, "-p", tip, "-F", "-"],
        root,
        timeout=timeout,
        env=committer_env(user),
        input_text=message,
    )


def _move_base(root: str, base: str, old: str, new: str, timeout: float) -> None:
    """The base branch to `new`; its checkout in the workspace directory follows when the base
    is checked out there (refused, base unchanged, when its files have local changes)."""
    head = git.run(["symbolic-ref", "-q", "HEAD"], root, check=False, timeout=timeout).out.strip()
    if head == f"refs/heads/{base}":
        result = git.run(["merge", "--ff-only", "--quiet", new], root, check=False, timeout=timeout)
        if not result.ok:
            raise HandoffRefused(
                "base_checkout_dirty",
                f"the workspace's checkout of {base} has local changes that the merge would "
                f"overwrite; nothing was changed: {result.err.strip()[-500:]}",
            )
        return
    git.run(["update-ref", f"refs/heads/{base}", new, old], root, timeout=timeout)


# ── push and discard ────────────────────────────────────────────────────────────────────────────
def task_push(*, user, task: Task, config) -> dict:
    """Push the task's branch to the workspace's remote (`origin`); the remote's answer on
    failure becomes the refusal's message (redacted)."""
    _check_repository_task(task)
    _check_owner(user, task)
    _check_finished(task)
    root, timeout = task.workspace.root_dir, timeout_of(config)
    _require_branch(task, timeout)
    url = git.run(["remote", "get-url", "origin"], root, check=False, timeout=timeout).out.strip()
    if not url:
        raise HandoffRefused(
            "no_remote", "the workspace's repository has no remote 'origin' to push to"
        )
    env, secrets = git.credential_env(url, task.workspace.push_credential_env)
    refspec = f"refs/heads/{task.branch}:refs/heads/{task.branch}"
    result = git.run(
        ["push", "--porcelain", "origin", refspec],
        root,
        check=False,
        timeout=max(timeout, 120.0),
        env=env,
        secrets=secrets,
    )
    if not result.ok:
        answer = (result.err or result.out).strip()[-2000:]
        raise HandoffRefused("push_rejected", f"the remote refused the push: {answer}")
    return {"ok": True, "pushed": task.branch, "remote": git.redact(url), "commit": task.commit}


def task_discard(*, user, task: Task, config) -> dict:
    """Delete the task's worktree and its branch."""
    _check_repository_task(task)
    _check_owner(user, task)
    _check_finished(task)
    worktree = task.worktree
    worktree_remove(task, config, delete_branch=True)
    return {
        "ok": True,
        "discarded": task.branch,
        "worktree_removed": bool(worktree) and not Path(worktree).exists(),
    }
