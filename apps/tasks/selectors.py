from __future__ import annotations

from django.db.models import QuerySet

from apps.tasks.models import Workspace


def workspaces_for_user(*, user) -> QuerySet[Workspace]:
    if not user.is_authenticated:
        return Workspace.objects.none()
    return Workspace.objects.filter(members=user).order_by("name")
