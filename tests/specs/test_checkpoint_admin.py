"""team_collab checkpoints in Django admin: read-only, filtered by status, and staff see only
those of their own workspaces."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from apps.specs.models import Checkpoint, Spec
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db
CHECKPOINTS = "/admin/specs/checkpoint/"


def checkpoint_in(workspace, user, phase_id, status="completed"):
    task = make_task(user, workspace, goal="ship", mode="team_collab")
    spec = Spec.objects.create(task=task, workspace=workspace, goal="ship", draft={"goal": "ship"})
    return Checkpoint.objects.create(spec=spec, task=task, phase_id=phase_id, status=status)


def test_staff_see_their_workspaces_checkpoints_read_only(tmp_path):
    owner = make_user("owner")
    a = make_workspace("alpha-ws", tmp_path / "a", owner)
    b = make_workspace("beta-ws", tmp_path / "b", owner)
    checkpoint_in(a, owner, "alpha-phase")
    mine = checkpoint_in(b, owner, "beta-phase", status="rolled_back")
    staff = make_user("bea")
    staff.is_staff = True
    staff.save()
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="specs"))
    b.members.add(staff)
    client = Client()
    client.force_login(staff)

    page = client.get(CHECKPOINTS).content.decode()
    assert "beta-phase" in page and "alpha-phase" not in page
    assert "beta-phase" in client.get(CHECKPOINTS + "?status=rolled_back").content.decode()
    assert "beta-phase" not in client.get(CHECKPOINTS + "?status=completed").content.decode()
    detail = client.get(f"{CHECKPOINTS}{mine.pk}/change/")
    assert detail.status_code == 200 and b'name="phase_id"' not in detail.content  # read-only
    assert client.get(CHECKPOINTS + "add/").status_code == 403
