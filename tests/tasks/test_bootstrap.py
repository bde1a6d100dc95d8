from __future__ import annotations

import subprocess

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from apps.tasks.models import Workspace
from tests.support import manage, migrate_sqlite, server_env

pytestmark = pytest.mark.django_db


@pytest.fixture
def dirs(settings, tmp_path):
    settings.AGENTKIT_WORKSPACES_DIR = tmp_path / "workspaces"
    return tmp_path


def test_bootstrap_creates_admin_and_demo_workspace(dirs, monkeypatch, capsys):
    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "root-admin")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "s3cret-pass-word")
    call_command("bootstrap")
    user = get_user_model().objects.get(username="root-admin")
    assert user.is_superuser and user.check_password("s3cret-pass-word")
    workspace = Workspace.objects.get(name="demo")
    assert list(workspace.members.all()) == [user]
    copied = dirs / "workspaces" / "demo"
    assert workspace.root_dir == str(copied.resolve())
    assert (copied / "textkit" / "slug.py").is_file()
    assert (copied / "tests" / "test_slug.py").is_file()
    assert "s3cret-pass-word" not in capsys.readouterr().out


def _git(root, *args) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return done.stdout


def test_the_demo_workspace_is_a_git_repository_with_the_shipped_project_committed(
    dirs, monkeypatch
):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "s3cret-pass-word")
    call_command("bootstrap")
    demo = dirs / "workspaces" / "demo"
    assert _git(demo, "rev-parse", "--show-toplevel").strip() == str(demo.resolve())
    assert _git(demo, "status", "--porcelain") == ""  # everything shipped is committed
    assert "textkit/slug.py" in _git(demo, "ls-files").split()
    assert _git(demo, "log", "--format=%an %s").strip() == "agentkit demo project"

    (demo / "textkit" / "slug.py").write_text("# edited by the agent\n")
    call_command("bootstrap", "--reset-demo")  # a reset is a fresh repository again
    assert _git(demo, "status", "--porcelain") == ""
    assert len(_git(demo, "log", "--format=%H").split()) == 1


def test_bootstrap_is_idempotent_and_keeps_agent_edits(dirs, monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "s3cret-pass-word")
    call_command("bootstrap")
    edited = dirs / "workspaces" / "demo" / "textkit" / "slug.py"
    edited.write_text("# edited by the agent\n")
    call_command("bootstrap")
    assert get_user_model().objects.count() == 1
    assert Workspace.objects.count() == 1
    assert edited.read_text() == "# edited by the agent\n"


def test_generated_password_is_printed_once_and_works(dirs, monkeypatch, capsys):
    monkeypatch.delenv("DJANGO_SUPERUSER_PASSWORD", raising=False)
    monkeypatch.delenv("DJANGO_SUPERUSER_USERNAME", raising=False)
    call_command("bootstrap")
    first = capsys.readouterr().out
    assert "Created admin user 'admin' with password: " in first
    password = first.split("with password: ")[1].split()[0]
    assert get_user_model().objects.get(username="admin").check_password(password)
    call_command("bootstrap")
    assert password not in capsys.readouterr().out


def test_bootstrap_command_runs_from_the_shell(tmp_path):
    env = server_env(tmp_path)
    migrate_sqlite(env)
    proc = manage(env, "bootstrap")
    assert proc.returncode == 0, proc.stderr
    assert "workspace 'demo'" in proc.stdout
