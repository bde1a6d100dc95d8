"""Specs in Django admin: read-mostly, filtered by status and workspace, and staff see only the
specs of their own workspaces."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from apps.specs.models import Spec, SpecReview
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db
SPECS = "/admin/specs/spec/"


def spec_in(workspace, user, goal, status="pending_review"):
    task = make_task(user, workspace, goal=goal, mode="plan_exec")
    spec = Spec.objects.create(
        task=task, workspace=workspace, goal=goal, status=status, draft={"goal": goal}
    )
    SpecReview.objects.create(spec=spec, review_id=f"{spec.pk}:spec_review")
    return spec


def test_staff_see_only_their_workspaces_specs_and_filter_by_status(tmp_path):
    owner = make_user("owner")
    a = make_workspace("alpha-ws", tmp_path / "a", owner)
    b = make_workspace("beta-ws", tmp_path / "b", owner)
    spec_in(a, owner, "alpha goal parked", status="parked")
    in_b = spec_in(b, owner, "beta goal pending")
    staff = make_user("bea")
    staff.is_staff = True
    staff.save()
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="specs"))
    b.members.add(staff)
    client = Client()
    client.force_login(staff)

    page = client.get(SPECS).content.decode()
    assert "beta goal pending" in page and "alpha goal parked" not in page
    assert "beta-ws" in page and "alpha-ws" not in page  # the workspace filter lists only b
    assert "beta goal pending" not in client.get(SPECS + "?status__exact=parked").content.decode()
    detail = client.get(f"{SPECS}{in_b.pk}/change/")
    assert detail.status_code == 200
    assert 'name="goal"' not in detail.content.decode()  # read-only: no editable field
    assert client.get(SPECS + "add/").status_code == 403
    assert client.get("/admin/specs/specreview/").status_code == 200
