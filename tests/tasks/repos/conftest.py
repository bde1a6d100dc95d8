"""Fixtures of the repository-workspace tests: a bare remote, a workspace cloned from it through
the API, a member who owns the tasks."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.tasks.models import Workspace
from tests.tasks.factories import make_user
from tests.tasks.repos.support import config_text, make_remote


@pytest.fixture
def remote(tmp_path):
    return make_remote(tmp_path)


@pytest.fixture
def repo(settings, tmp_path, config_file, remote):
    """(user, client, workspace) — a repository workspace cloned from the bare remote."""
    settings.AGENTKIT_WORKSPACES_DIR = tmp_path / "workspaces"
    config_file(config_text(tmp_path))
    user = make_user("alice")
    client = Client()
    client.force_login(user)
    response = client.post(
        "/api/workspaces",
        {"name": "repo", "git_url": f"file://{remote}"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return user, client, Workspace.objects.get(pk=response.json()["id"])
