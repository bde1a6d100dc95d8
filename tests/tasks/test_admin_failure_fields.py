"""Admin shows what a failed task salvaged and which task it retried, never its original error."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db


def test_admin_task_page_shows_salvage_and_retry_of_but_not_the_original_error(tmp_path):
    owner = make_user("owner")
    workspace = make_workspace("ws", tmp_path, owner)
    first = make_task(
        owner,
        workspace,
        status="failed",
        salvage={"source": "editor", "files": ["app.py"], "diff": "+salvaged-line-marker"},
        original_error="Traceback: secret-internal-detail",
    )
    retry = make_task(owner, workspace, retry_of=first)
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-123-root")
    client = Client()
    client.force_login(admin)

    page = client.get(f"/admin/tasks/task/{first.pk}/change/").content.decode()
    assert "salvaged-line-marker" in page
    assert "secret-internal-detail" not in page
    retry_page = client.get(f"/admin/tasks/task/{retry.pk}/change/").content.decode()
    assert f"/admin/tasks/task/{first.pk}/change/" in retry_page  # retry_of links the first
