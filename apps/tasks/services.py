"""State changes of apps.tasks. Keyword-only arguments, named <entity>_<action>.

The application error lives in errors.py (re-exported here), a message's routing (modes,
skills, length) in routing.py, the rows of new tasks in creation.py."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from apps.tasks.creation import TaskRequest, create_one
from apps.tasks.errors import ApplicationError
from apps.tasks.models import FINAL_STATUSES, ApiToken, Conversation, Task, Workspace

logger = logging.getLogger(__name__)


@transaction.atomic
def workspace_create(*, name: str, root_dir: Path, members=()) -> Workspace:
    workspace = Workspace(name=name, root_dir=str(root_dir))
    workspace.full_clean()
    workspace.save()
    workspace.members.add(*members)
    return workspace


def install_demo_project(source: Path, target: Path) -> None:
    """Copy the shipped demo project to `target` and make it a git repository with one commit,
    as a real project would be: team_collab's `@snapshot` rollback and git-aware tools then work
    in the demo. Without git (or if it fails) the copy stays a plain directory; a team run says
    so (`snapshot_unavailable`)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target)
    git = shutil.which("git")
    if git is None:
        logger.warning("git is not installed: the demo workspace is not a git repository")
        return
    identity = ["-c", "user.name=agentkit", "-c", "user.email=agentkit@localhost"]
    steps = (
        [git, "init", "-q", "-b", "main"],
        [git, "add", "-A"],
        [git, *identity, "-c", "commit.gpgsign=false", "commit", "-q", "-m", "demo project"],
    )
    env = {  # no user or system git configuration applies (hooks, templates, signing)
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    try:
        for step in steps:
            subprocess.run(step, cwd=target, env=env, check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(target / ".git", ignore_errors=True)
        logger.warning("the demo workspace is not a git repository: git failed (%s)", exc)


# ── tasks ───────────────────────────────────────────────────────────────────────────────────────
def task_create(
    *,
    user,
    workspace: Workspace | None,
    text: str,
    mode: str | None = None,
    skill: str | None = None,
    client_msg_id: str = "",
    config,
    conversation=None,
    model: str = "",
):
    """Create a queued task after checking the user may use the workspace. Re-sending the same
    `client_msg_id` returns the task created the first time (no duplicate on reconnect).
    `conversation` (an id of the user's own conversation) continues it: same workspace (taken
    from the conversation when `workspace` is None), earlier turns as history. Without it, the
    task starts a new conversation. The access checks read before the transaction; the
    transaction (SQLite: the database's one write lock) holds the re-send check and the rows."""
    request = TaskRequest(user, workspace, text, mode, skill, client_msg_id, conversation, model)
    return create_one(request, config)


def task_request_cancel(*, task) -> bool:
    """Ask a running task to stop; the runner notices within a fraction of a second. Returns
    False when the task had already finished."""
    now = timezone.now()
    # A parked task (its spec review timed out) has no run to notice: it ends cancelled here.
    if Task.objects.filter(pk=task.pk, status="parked").update(
        status="cancelled", cancel_requested_at=now, finished_at=now
    ):
        return True
    updated = (
        Task.objects.filter(pk=task.pk, cancel_requested_at__isnull=True)
        .exclude(status__in=FINAL_STATUSES)
        .update(cancel_requested_at=now)
    )
    if updated or task.status not in FINAL_STATUSES:
        updated = _end_if_no_run(task.pk) or updated
    return bool(updated)


def _end_if_no_run(task_id: int) -> bool:
    """A cancelled task that no live run holds (its process died, or it waits in a queue) ends
    now: no run would notice the request (liveness.py). A run that claims it later finds it
    ended and does nothing."""
    from apps.specs.checkpoints import run_gone
    from apps.tasks.events.ending import publish_blocking, task_end_now

    messages = task_end_now(task_id, "cancelled", expect=run_gone)
    if messages:
        publish_blocking(task_id, messages)
    return bool(messages)


def task_delete(*, user, task) -> None:
    """Delete a finished task and its events. Only its owner may; a running task is stopped
    first."""
    if task.user_id != user.pk:
        raise ApplicationError(
            "only the person who started a task can delete it", {"error_code": "forbidden"}
        )
    if task.status not in FINAL_STATUSES and task.status != "parked":
        raise ApplicationError(
            "the task is still running: stop it first, then delete it",
            {"error_code": "task_running"},
        )
    if task.worktree:  # a repository task: its worktree goes with it (its branch stays)
        _remove_worktree_of(task)
    task.delete()


def _remove_worktree_of(task) -> None:
    from apps.tasks.conf import agent_config
    from apps.tasks.vcs.worktrees import worktree_remove

    others = Task.objects.filter(workspace_id=task.workspace_id, branch=task.branch).exclude(
        pk=task.pk
    )
    if others.exclude(status__in=FINAL_STATUSES).exists():
        return  # a later turn still works on the branch
    try:
        worktree_remove(task, agent_config())
    except Exception:  # the task goes all the same; the reaper's expiry cannot find it later
        logger.warning("the worktree of task %s could not be removed", task.pk, exc_info=True)


# ── API tokens ─────────────────────────────────────────────────────────────────────────────────
def _token_hash(key: str) -> str:
    import hashlib

    return hashlib.sha256(key.encode()).hexdigest()


def api_token_create(*, user, name: str = "") -> tuple[object, str]:
    """Returns (ApiToken, the plain key). The key is shown once; only its hash is stored."""
    key = "ak_" + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=key[:10], key_hash=_token_hash(key)
    )
    return token, key


def api_token_authenticate(*, key: str):
    """The user of an active token, or None."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=_token_hash(key), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token.user


def api_token_revoke(*, token) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


RETRYABLE_STATUSES = ("failed", "gave_up_after_reflections")


def task_retry(*, user, task):
    """A new queued task with the same goal, mode, skill and conversation as a failed one,
    linked to it by `retry_of` (the error card's Retry). Only the task's owner may retry, and
    only a failure whose error says a retry may help."""
    if task.user_id != user.pk:
        raise ApplicationError("only the task's owner can retry it", {"error_code": "forbidden"})
    if task.status not in RETRYABLE_STATUSES:
        raise ApplicationError(
            f"only a failed task can be retried; this one is {task.status}",
            {"error_code": "not_retryable"},
        )
    if not (task.error or {}).get("retryable"):
        raise ApplicationError(
            "this failure will not go away by retrying: follow the error's suggestions, then "
            "send a new message",
            {"error_code": "not_retryable"},
        )
    if not task.workspace.members.filter(pk=user.pk).exists():
        raise ApplicationError("workspace not found", {"error_code": "not_found"})
    if task.conversation_id is not None:
        Conversation.objects.filter(pk=task.conversation_id).update(updated_at=timezone.now())
    return Task.objects.create(
        workspace=task.workspace,
        user=user,
        conversation_id=task.conversation_id,
        mode=task.mode,
        skill=task.skill,
        goal=task.goal,
        retry_of=task,
    )


CONVERSATION_TITLE_MAX = 200


def conversation_rename(*, conversation, title) -> Conversation:
    """A new title for a conversation (the sidebar's Rename); its turns and order stay as they
    are (`updated_at` is left alone, so renaming does not move it to the top)."""
    if not isinstance(title, str) or not title.strip():
        raise ApplicationError(
            "'title' must be a non-empty string: the conversation's new name",
            {"error_code": "invalid_field"},
        )
    title = " ".join(title.split())
    if len(title) > CONVERSATION_TITLE_MAX:
        raise ApplicationError(
            f"'title' is {len(title)} characters; at most {CONVERSATION_TITLE_MAX}",
            {"error_code": "invalid_field"},
        )
    Conversation.objects.filter(pk=conversation.pk).update(title=title)
    conversation.title = title
    return conversation
