"""State changes of a batch run: the user it runs as, and per task a fresh workspace (a copy of
its source) with a queued Task in it, owned by that user, so it shows in the chat sidebar."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from apps.tasks.batch.spec import TaskSpec, is_git_repository
from apps.tasks.models import Task
from apps.tasks.services import ApplicationError, task_create, workspace_create

GIT_TIMEOUT = 300  # seconds to clone a source repository


def batch_workspace(*, name: str | None, user):
    """run_tasks --workspace NAME: the existing workspace every task runs in (None: a fresh
    copy per task). The batch's user must be one of its members."""
    if not name:
        return None
    from apps.tasks.models import Workspace

    workspace = Workspace.objects.filter(name=name, members=user).first()
    if workspace is None:
        raise ApplicationError(
            f"no workspace {name!r} of {user.get_username()}: create it (chat page, POST "
            "/api/workspaces) or add the user to its members in admin"
        )
    return workspace


def batch_user(*, username: str | None):
    """The user the batch runs as: the one named; else the bootstrap admin
    (DJANGO_SUPERUSER_USERNAME, default admin) or the only superuser."""
    users = get_user_model().objects
    if username:
        user = users.filter(username=username, is_active=True).first()
        if user is None:
            raise ApplicationError(
                f"no active user {username!r}: create it (python manage.py createsuperuser) "
                "or name another with --user"
            )
        return user
    admin = os.environ.get("DJANGO_SUPERUSER_USERNAME", "admin").strip() or "admin"
    user = users.filter(username=admin, is_active=True, is_superuser=True).first()
    if user is not None:
        return user
    superusers = list(users.filter(is_superuser=True, is_active=True)[:2])
    if len(superusers) == 1:
        return superusers[0]
    if not superusers:
        raise ApplicationError(
            "no user to run the tasks as: run 'python manage.py bootstrap' (creates the admin) "
            "or name a user with --user"
        )
    raise ApplicationError(
        f"several superusers and none named {admin!r}: choose one with --user NAME"
    )


def batch_label() -> str:
    """Names this run's workspaces: batch-YYYYmmdd-HHMMSS-xxxx."""
    return f"batch-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def _copy_source(spec: TaskSpec, target: Path) -> None:
    if spec.source is None:
        target.mkdir(parents=True)
        return
    if is_git_repository(spec.source):
        # A repository contributes its committed state (HEAD, or `ref`), never a dirty tree.
        command = ["git", "clone", "--quiet", "--no-hardlinks", str(spec.source), str(target)]
        _git(command, spec)
        if spec.ref:
            _git(["git", "-C", str(target), "checkout", "--quiet", spec.ref], spec)
        return
    shutil.copytree(spec.source, target, symlinks=True)


def _git(command: list[str], spec: TaskSpec) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=GIT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ApplicationError(f"task {spec.id!r}: git failed on {spec.source}: {exc}") from None
    if done.returncode != 0:
        raise ApplicationError(
            f"task {spec.id!r}: {' '.join(command[:2])} failed on {spec.source}: "
            f"{done.stderr.strip()[-500:]}"
        )


def batch_workspace_copy(*, spec: TaskSpec, label: str, workspaces_dir: Path) -> Path:
    """A fresh copy of the task's source at workspaces_dir/<label>/<id> (an empty directory
    when it has none). A failed copy leaves nothing behind."""
    target = (Path(workspaces_dir) / label / spec.id).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        _copy_source(spec, target)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target


def batch_task_create(
    *, spec: TaskSpec, user, root: Path, label: str, config, workspace=None
) -> Task:
    """Make `root` a workspace of `user` and create the queued Task in it. On failure the copy
    is removed and no rows are left. `workspace` (run_tasks --workspace): the task goes into
    this existing workspace instead (nothing copied, nothing removed)."""

    def create_in(workspace) -> Task:
        return task_create(
            user=user,
            workspace=workspace,
            text=spec.goal,
            mode=spec.mode,
            skill=spec.skill or None,
            config=config,
            model=spec.model,
        )

    if workspace is not None:
        return create_in(workspace)
    try:
        with transaction.atomic():
            name = re.sub(r"[^\w.-]+", "-", f"{label}-{spec.id}")[:100]
            workspace = workspace_create(name=name, root_dir=root, members=[user])
            if spec.verification:
                workspace.verification_commands = list(spec.verification)
                workspace.save(update_fields=["verification_commands"])
            return create_in(workspace)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def batch_tasks_create(
    items: list[tuple[TaskSpec, Path]], *, user, label: str, config, workspace=None
) -> list[Task | Exception]:
    """batch_task_create for several tasks in ONE transaction (one commit, one hold of the
    database's write lock). Each task gets a Task or the exception that stopped it; a failure
    undoes only its own task (a savepoint) and removes only its own copy."""
    results: list[Task | Exception] = []
    with transaction.atomic():
        for spec, root in items:
            try:
                results.append(
                    batch_task_create(
                        spec=spec,
                        user=user,
                        root=root,
                        label=label,
                        config=config,
                        workspace=workspace,
                    )
                )
            except Exception as exc:
                results.append(exc)
    return results
