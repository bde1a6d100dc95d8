"""First-run setup (`manage.py bootstrap`, run by `make run`): the admin user and the demo
workspace. Safe to run again."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from apps.tasks.models import Workspace
from apps.tasks.services import ApplicationError, install_demo_project, workspace_create


@dataclass(frozen=True)
class BootstrapResult:
    username: str
    user_created: bool
    generated_password: str | None
    password_updated: bool
    workspace_name: str
    workspace_dir: Path
    workspace_created: bool


def admin_ensure(*, username: str, password: str | None) -> tuple[object, bool, str | None, bool]:
    """Create the admin user if missing. Returns (user, created, generated_password, updated).
    An explicitly given password is applied to an existing user too; without one, an existing
    user is left alone (idempotent)."""
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    if user is None:
        generated = None
        if not password:
            generated = password = secrets.token_urlsafe(12)
        user = User.objects.create_superuser(username=username, email="", password=password)
        return user, True, generated, False
    updated = False
    if password and not user.check_password(password):
        user.set_password(password)
        user.save(update_fields=["password"])
        updated = True
    return user, False, None, updated


@transaction.atomic
def bootstrap_run(
    *, username: str, password: str | None, demo_source: Path, workspaces_dir: Path
) -> BootstrapResult:
    """Admin user + the demo workspace (a copy of the shipped demo project). Safe to run again."""
    user, created, generated, updated = admin_ensure(username=username, password=password)
    target = (workspaces_dir / "demo").resolve()
    if not target.exists():
        if not demo_source.is_dir():
            raise ApplicationError(
                f"the demo project is missing at {demo_source}; restore it from git"
            )
        install_demo_project(demo_source, target)
    workspace = Workspace.objects.filter(name="demo").first()
    workspace_created = workspace is None
    if workspace is None:
        workspace = workspace_create(name="demo", root_dir=target, members=[user])
    else:
        workspace.members.add(user)
    return BootstrapResult(
        username=username,
        user_created=created,
        generated_password=generated,
        password_updated=updated,
        workspace_name=workspace.name,
        workspace_dir=Path(workspace.root_dir),
        workspace_created=workspace_created,
    )
