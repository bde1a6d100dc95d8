"""A Plan & verify task on a repository workspace (issue 39): each phase it passes forward is a
commit on its branch ("<Phase>: <goal>"), and its end commits what is left; verification runs in
the task's worktree. The shipped demo project as a git repository, the shipped scripted model."""

from __future__ import annotations

import shutil

import pytest
from asgiref.sync import sync_to_async

from apps.tasks.models import Task, Workspace
from apps.tasks.run.runner import run_task
from tests.config_text import without_spec_review
from tests.support import ROOT
from tests.tasks.factories import make_task, make_user, make_workspace
from tests.tasks.repos.support import git

pytestmark = pytest.mark.django_db(transaction=True)

GOAL = "fix the failing test in tests/test_slug.py"


async def test_plan_phases_are_commits_on_the_branch(tmp_path, settings, config_file):
    settings.AGENTKIT_WORKSPACES_DIR = tmp_path / "workspaces"
    config_file(without_spec_review((ROOT / "agentkit.yaml").read_text()))
    root = tmp_path / "demo"
    shutil.copytree(ROOT / "demo" / "workspace", root)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "demo")
    user = await sync_to_async(make_user)("alice")
    workspace = await sync_to_async(make_workspace)("demo-repo", root, user)
    await sync_to_async(Workspace.objects.filter(pk=workspace.pk).update)(base_branch="main")
    workspace = await sync_to_async(Workspace.objects.get)(pk=workspace.pk)
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="plan_exec")
    assert await run_task(task.pk) == "completed"
    task = await sync_to_async(Task.objects.get)(pk=task.pk)
    subjects = git(root, "log", "--format=%s", f"main..{task.branch}").splitlines()
    assert subjects and all(s.endswith(GOAL) for s in subjects)
    assert f"Building: {GOAL}" in subjects
    assert git(root, "rev-parse", task.branch) == task.commit
    fixed = git(root, "show", f"{task.branch}:textkit/slug.py")
    assert 'r"[^a-zA-Z0-9]+"' in fixed
    assert 'r"[^a-zA-Z0-9]+"' not in (root / "textkit" / "slug.py").read_text()  # base as it was
    assert git(root, "status", "--porcelain") == ""
    tree = git(root, "ls-tree", "-r", "--name-only", task.branch).splitlines()
    assert not [name for name in tree if "__pycache__" in name or ".pytest_cache" in name]
