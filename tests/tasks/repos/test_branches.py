"""A task is a branch (issue 39): on a repository workspace cloned from a bare remote, Agent
tasks run in parallel each in its own worktree and branch, commit their work, and hand it back
as a merge, a patch, a push or a discard. Real git, real SQLite, the real runner, the scripted
model."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from apps.tasks.models import Task, TaskEvent
from apps.tasks.run.runner import run_task
from tests.tasks.factories import make_task, make_user
from tests.tasks.repos.support import NOTES, config_text, git

pytestmark = pytest.mark.django_db(transaction=True)


def _post(client, url, body=None):
    return client.post(url, body or {}, content_type="application/json")


async def _run(user, workspace, goal):
    task = await sync_to_async(make_task)(user, workspace, goal=goal)
    assert await run_task(task.pk) == "completed"
    return await sync_to_async(Task.objects.get)(pk=task.pk)


def _base(workspace) -> str:
    return git(workspace.root_dir, "rev-parse", f"refs/heads/{workspace.base_branch}")


async def test_two_agent_tasks_run_at_once_on_their_own_branches_and_both_merge(
    repo, config_file, tmp_path
):
    user, client, workspace = repo
    assert workspace.base_branch == "main"
    config_file(config_text(tmp_path, delay_ms=40))  # each answer streams for a while
    alpha = await sync_to_async(make_task)(user, workspace, goal="add ALPHA")
    beta = await sync_to_async(make_task)(user, workspace, goal="add BETA")
    statuses = await asyncio.wait_for(asyncio.gather(run_task(alpha.pk), run_task(beta.pk)), 120)
    assert statuses == ["completed", "completed"]
    alpha, beta = [await sync_to_async(Task.objects.get)(pk=t.pk) for t in (alpha, beta)]
    # Neither waited for the other: the one-writer rule holds per worktree, not per repository.
    waited = await sync_to_async(
        TaskEvent.objects.filter(task__in=[alpha, beta], type="task_waiting").count
    )()
    assert waited == 0
    assert alpha.started_at < beta.finished_at and beta.started_at < alpha.finished_at
    assert alpha.branch == f"agentkit/{alpha.pk}-add-alpha"
    assert beta.branch == f"agentkit/{beta.pk}-add-beta"
    for task, name in ((alpha, "alpha.py"), (beta, "beta.py")):
        detail = (await sync_to_async(client.get)(f"/api/tasks/{task.pk}")).json()
        assert detail["branch"] == task.branch and detail["commit"] == task.commit
        assert git(workspace.root_dir, "rev-parse", f"refs/heads/{task.branch}") == task.commit
        assert git(workspace.root_dir, "show", "--name-only", "--format=", task.commit) == name
        assert not (Path(workspace.root_dir) / name).exists()  # the base's checkout untouched
    # The commit: author agentkit, committer the requesting user, the task's trailer.
    fields = git(workspace.root_dir, "log", "-1", "--format=%an|%cn|%B", alpha.commit)
    assert fields.startswith("agentkit|alice|add ALPHA")
    assert f"Agentkit-Task: {alpha.pk}" in fields

    first = await sync_to_async(_post)(client, f"/api/tasks/{alpha.pk}/merge")
    assert first.status_code == 200, first.content
    assert first.json()["ok"] is True and first.json()["merged"] == "fast-forward"
    second = await sync_to_async(_post)(client, f"/api/tasks/{beta.pk}/merge")
    assert second.status_code == 200, second.content
    assert second.json()["merged"] == "merge commit"
    files = git(workspace.root_dir, "ls-tree", "--name-only", "refs/heads/main").split()
    assert {"alpha.py", "beta.py"} <= set(files)
    # The base's checkout follows the base branch; the merged tasks' worktrees are gone.
    assert (Path(workspace.root_dir) / "beta.py").read_text() == "BETA = 2\n"
    for task in (alpha, beta):
        assert not Path(task.worktree).exists()


async def test_a_merge_whose_base_moved_under_it_is_refused_naming_the_files(repo):
    user, client, workspace = repo
    task = await _run(user, workspace, "reword the NOTES")
    # Meanwhile someone changes the same line on the base branch.
    root = Path(workspace.root_dir)
    (root / "notes.txt").write_text(NOTES.replace("line two", "line two, said a human"))
    git(root, "commit", "-q", "-am", "a human edits the notes")
    before = _base(workspace)
    response = await sync_to_async(_post)(client, f"/api/tasks/{task.pk}/merge")
    assert response.status_code == 409
    problem = response.json()["error"]
    assert problem["code"] == "merge_conflict"
    assert problem["files"] == ["notes.txt"]
    assert "notes.txt" in problem["message"] and "follow-up" in problem["message"]
    assert _base(workspace) == before
    assert "said a human" in (root / "notes.txt").read_text()
    assert git(root, "status", "--porcelain") == ""
    assert Path(task.worktree).is_dir()  # the branch keeps its worktree for a rebase


async def test_the_patch_applies_with_git_am_to_a_fresh_clone_and_its_tests_pass(
    repo, remote, tmp_path
):
    user, client, workspace = repo
    task = await _run(user, workspace, "MULTIPLY two numbers")
    response = await sync_to_async(client.get)(f"/api/tasks/{task.pk}/patch")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    patch = response.content.decode()
    assert patch.startswith("From ") and f"Agentkit-Task: {task.pk}" in patch
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(remote), str(fresh))
    done = subprocess.run(
        ["git", "-c", "user.name=r", "-c", "user.email=r@x", "am"],
        cwd=fresh,
        input=patch,
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:django"],
        cwd=fresh,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "2 passed" in tests.stdout


async def test_a_push_reaches_the_bare_remote(repo, remote):
    user, client, workspace = repo
    task = await _run(user, workspace, "add ALPHA")
    response = await sync_to_async(_post)(client, f"/api/tasks/{task.pk}/push")
    assert response.status_code == 200, response.content
    assert response.json()["ok"] is True
    assert git(remote, "rev-parse", f"refs/heads/{task.branch}") == task.commit


async def test_a_refused_push_says_what_the_remote_answered(repo, remote):
    user, client, workspace = repo
    task = await _run(user, workspace, "add ALPHA")
    hooks = remote / "hooks"
    (hooks / "pre-receive").write_text(
        "#!/bin/sh\necho 'branch names are checked here' >&2\nexit 1\n"
    )
    (hooks / "pre-receive").chmod(0o755)
    response = await sync_to_async(_post)(client, f"/api/tasks/{task.pk}/push")
    assert response.status_code == 409
    problem = response.json()["error"]
    assert problem["code"] == "push_rejected"
    assert "branch names are checked here" in problem["message"]


async def test_discard_leaves_no_worktree_and_no_branch(repo):
    user, client, workspace = repo
    task = await _run(user, workspace, "add BETA")
    assert Path(task.worktree).is_dir()
    response = await sync_to_async(_post)(client, f"/api/tasks/{task.pk}/discard")
    assert response.status_code == 200 and response.json()["ok"] is True
    assert not Path(task.worktree).exists()
    assert git(workspace.root_dir, "branch", "--list", task.branch) == ""
    assert task.worktree not in git(workspace.root_dir, "worktree", "list")
    again = await sync_to_async(_post)(client, f"/api/tasks/{task.pk}/merge")
    assert again.status_code == 409 and again.json()["error"]["code"] == "branch_gone"


async def test_only_the_owner_or_an_admin_hands_the_branch_off(repo):
    user, _, workspace = repo
    task = await _run(user, workspace, "add ALPHA")
    bob = await sync_to_async(make_user)("bob")
    await sync_to_async(workspace.members.add)(bob)
    other = Client()
    await sync_to_async(other.force_login)(bob)
    for action in ("merge", "push", "discard"):
        response = await sync_to_async(_post)(other, f"/api/tasks/{task.pk}/{action}")
        assert response.status_code == 403, action
    assert git(workspace.root_dir, "rev-parse", f"refs/heads/{task.branch}") == task.commit


async def test_a_follow_up_turn_continues_on_the_same_branch(repo):
    from apps.tasks.models import Conversation

    user, _, workspace = repo
    thread = await sync_to_async(Conversation.objects.create)(user=user, workspace=workspace)
    first = await sync_to_async(make_task)(user, workspace, goal="add ALPHA", conversation=thread)
    assert await run_task(first.pk) == "completed"
    second = await sync_to_async(make_task)(user, workspace, goal="add BETA", conversation=thread)
    assert await run_task(second.pk) == "completed"
    first, second = [await sync_to_async(Task.objects.get)(pk=t.pk) for t in (first, second)]
    assert second.branch == first.branch and second.worktree == first.worktree
    log = git(workspace.root_dir, "log", "--format=%s", f"main..{second.branch}").splitlines()
    assert log == ["add BETA", "add ALPHA"]
    # An Answer turn reads the base: it gets no branch.
    answer = await sync_to_async(make_task)(
        user, workspace, goal="why?", mode="direct_chat", conversation=thread
    )
    await run_task(answer.pk)
    answer = await sync_to_async(Task.objects.get)(pk=answer.pk)
    assert answer.branch == "" and answer.worktree == ""


async def test_a_plain_directory_workspace_behaves_as_before(demo):
    user, workspace, root = demo
    assert not workspace.is_repository
    task = await _run(user, workspace, "fix the failing test in tests/test_slug.py")
    assert task.branch == "" and task.worktree == "" and task.commit == ""
    assert 'r"[^a-zA-Z0-9]+"' in (root / "textkit" / "slug.py").read_text()  # edited in place
    client = Client()
    await sync_to_async(client.force_login)(user)
    detail = (await sync_to_async(client.get)(f"/api/tasks/{task.pk}")).json()
    assert "branch" not in detail and "commit" not in detail
    response = await sync_to_async(_post)(client, f"/api/tasks/{task.pk}/merge")
    assert response.status_code == 400 and response.json()["error"]["code"] == "no_branch"


async def test_admin_shows_each_task_branch_and_commit(repo):
    from django.contrib.auth import get_user_model

    user, _, workspace = repo
    task = await _run(user, workspace, "add ALPHA")
    root = await sync_to_async(get_user_model().objects.create_superuser)(
        "root", "root@example.org", "pw-123-root"
    )
    admin = Client()
    await sync_to_async(admin.force_login)(root)
    # The list stays as narrow as it was; a branch or a commit finds its task by search.
    found = await sync_to_async(admin.get)("/admin/tasks/task/", {"q": task.commit[:12]})
    assert f"/admin/tasks/task/{task.pk}/change/" in found.content.decode()
    page = (await sync_to_async(admin.get)(f"/admin/tasks/task/{task.pk}/change/")).content
    assert task.branch in page.decode() and task.commit in page.decode()
