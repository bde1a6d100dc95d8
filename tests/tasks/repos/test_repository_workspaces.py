"""Repository workspaces: cloned through POST /api/workspaces {"name", "git_url", "branch"?} (file://
only under workspaces.allowed_roots, https and ssh; a URL with a password refused, a failed clone
redacted and leaving nothing behind), or registered from a git work tree under an allowed root."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.tasks.models import Workspace
from apps.tasks.vcs.git import redact
from tests.tasks.factories import make_user
from tests.tasks.repos.support import config_text, git

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(settings, tmp_path, config_file):
    settings.AGENTKIT_WORKSPACES_DIR = tmp_path / "workspaces"
    config_file(config_text(tmp_path))
    c = Client()
    c.force_login(make_user("alice"))
    return c


def _clone(client, **body):
    return client.post("/api/workspaces", {"name": "r", **body}, content_type="application/json")


def test_a_clone_records_its_base_branch_and_is_listed_as_a_repository(client, remote):
    git(remote, "branch", "release", "main")
    response = _clone(client, git_url=f"file://{remote}", branch="release")
    assert response.status_code == 201, response.content
    ws = Workspace.objects.get(pk=response.json()["id"])
    assert ws.base_branch == "release" and ws.git_url == f"file://{remote}"
    assert git(ws.root_dir, "symbolic-ref", "--short", "HEAD") == "release"
    listed = client.get("/api/workspaces").json()["workspaces"]
    assert listed == [
        {
            "id": ws.pk,
            "name": "r",
            "repository": True,
            "base_branch": "release",
            "git_url": f"file://{remote}",
        }
    ]


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("file:///etc", "not_allowed"),
        ("ext::sh -c touch% /tmp/pwned", "invalid_field"),
        ("git://example.org/r.git", "invalid_field"),
        ("/srv/some/path", "invalid_field"),
        ("--upload-pack=touch /tmp/x", "invalid_field"),
        ("https://bob:hunter2@example.org/r.git", "invalid_field"),
        ("https://hunter2@example.org/r.git", "invalid_field"),
    ],
)
def test_clone_urls_outside_the_trust_boundary_are_refused(client, url, code, tmp_path):
    response = _clone(client, git_url=url)
    assert response.status_code == 400
    problem = response.json()["error"]
    assert problem["code"] == code
    assert "hunter2" not in problem["message"]
    assert not Workspace.objects.exists()
    assert not list((tmp_path / "workspaces").glob("repos/*"))


def test_a_failed_clone_says_why_and_leaves_nothing(client, tmp_path):
    response = _clone(client, git_url=f"file://{tmp_path}/missing.git")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "clone_failed"
    assert "could not be cloned" in response.json()["error"]["message"]
    assert not Workspace.objects.exists()
    assert not list((tmp_path / "workspaces" / "repos").iterdir())


def test_a_git_work_tree_under_an_allowed_root_registers_as_a_repository(client, remote, tmp_path):
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(remote), str(checkout))
    plain = tmp_path / "plain"
    plain.mkdir()
    made = client.post(
        "/api/workspaces",
        {"name": "c", "directory": str(checkout)},
        content_type="application/json",
    )
    assert made.status_code == 201
    assert Workspace.objects.get(name="c").base_branch == "main"
    made = client.post(
        "/api/workspaces", {"name": "p", "directory": str(plain)}, content_type="application/json"
    )
    assert made.status_code == 201
    assert Workspace.objects.get(name="p").base_branch == ""


def test_credentials_never_survive_in_git_messages():
    text = "fatal: could not read from https://bob:s3cret-token@example.org/r.git and ssh://x@h"
    cleaned = redact(text, ("s3cret-token",))
    assert "s3cret" not in cleaned and "bob" not in cleaned
    assert "https://***@example.org/r.git" in cleaned


def test_ssh_and_https_urls_pass_the_check():
    from apps.tasks.workspaces.repositories import check_clone_url

    for url in (
        "git@github.com:team/app.git",
        "ssh://git@example.org:2222/team/app.git",
        "https://example.org/team/app.git",
    ):
        assert check_clone_url(url, []) == url


def test_the_push_credential_goes_through_git_s_environment_and_is_redacted(monkeypatch):
    from apps.tasks.vcs.git import credential_env

    monkeypatch.setenv("AGENTKIT_TEST_PUSH_TOKEN", "tok-123456")
    env, secrets = credential_env("https://example.org/r.git", "AGENTKIT_TEST_PUSH_TOKEN")
    assert env["GIT_CONFIG_KEY_0"] == "http.extraHeader"
    assert env["GIT_CONFIG_VALUE_0"].startswith("Authorization: Basic ")
    assert "tok-123456" in secrets
    assert redact(f"denied for {env['GIT_CONFIG_VALUE_0']} tok-123456", secrets).count("***") == 2
    ssh_env, _ = credential_env("git@example.org:r.git", "AGENTKIT_TEST_PUSH_TOKEN")
    assert "-i tok-123456" in ssh_env["GIT_SSH_COMMAND"]
    assert credential_env("https://example.org/r.git", "AGENTKIT_UNSET_VARIABLE") == ({}, ())
