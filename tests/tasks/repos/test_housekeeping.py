"""Housekeeping of task worktrees (issue 39): the reaper removes a finished task's worktree after
`workspaces.worktree_ttl_days` (its branch stays); a dead run's task finds its worktree again
(made again from its branch when the directory went); a workspace over `worktree_max_mb` gets
no new worktree, and the task says why."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from apps.tasks.conf import agent_config
from apps.tasks.models import Task
from apps.tasks.run.reaper import expire_worktrees
from apps.tasks.run.runner import run_task
from apps.tasks.vcs.worktrees import task_worktree_ensure
from tests.tasks.factories import make_task
from tests.tasks.repos.support import config_text, git

pytestmark = pytest.mark.django_db(transaction=True)


async def _run(user, workspace, goal):
    task = await sync_to_async(make_task)(user, workspace, goal=goal)
    status = await run_task(task.pk)
    return status, await sync_to_async(Task.objects.select_related("workspace", "user").get)(
        pk=task.pk
    )


async def test_the_reaper_removes_worktrees_older_than_the_ttl_and_keeps_their_branches(repo):
    user, _, workspace = repo
    _, old = await _run(user, workspace, "add ALPHA")
    _, fresh = await _run(user, workspace, "add BETA")
    ended = timezone.now() - timedelta(days=agent_config().workspaces.worktree_ttl_days + 1)
    await sync_to_async(Task.objects.filter(pk=old.pk).update)(finished_at=ended)
    assert await sync_to_async(expire_worktrees)(force=True) == [old.pk]
    assert not Path(old.worktree).exists() and Path(fresh.worktree).is_dir()
    assert git(workspace.root_dir, "rev-parse", f"refs/heads/{old.branch}") == old.commit
    assert (await sync_to_async(Task.objects.get)(pk=old.pk)).worktree == ""


async def test_a_taken_over_task_finds_its_worktree_again(repo):
    user, _, workspace = repo
    _, task = await _run(user, workspace, "add ALPHA")
    path = Path(task.worktree)
    (path / "half-done.txt").write_text("left by the dead run\n")
    again = await sync_to_async(task_worktree_ensure)(task, agent_config())
    assert again == path and (path / "half-done.txt").exists()
    shutil.rmtree(path)  # the directory went with the machine; the branch is in the repository
    again = await sync_to_async(task_worktree_ensure)(task, agent_config())
    assert again.is_dir() and (again / "alpha.py").read_text() == "ALPHA = 1\n"
    assert git(again, "rev-parse", "--abbrev-ref", "HEAD") == task.branch


async def test_a_workspace_over_its_disk_cap_gets_no_new_worktree(repo, config_file, tmp_path):
    user, _, workspace = repo
    _, first = await _run(user, workspace, "add ALPHA")
    (Path(first.worktree) / "big.bin").write_bytes(b"\0" * (2 * 1024 * 1024))
    config_file(
        config_text(tmp_path).replace(
            f"allowed_roots: [{tmp_path}]", f"allowed_roots: [{tmp_path}], worktree_max_mb: 1"
        )
    )
    status, second = await _run(user, workspace, "add BETA")
    assert status == "failed"
    assert second.error["error_code"] == "disk_cap"
    assert "workspaces.worktree_max_mb" in second.error["message"]
    assert second.branch == "" and second.worktree == ""


async def test_tool_caches_left_in_the_worktree_are_not_committed(repo):
    from apps.tasks.vcs.worktrees import task_commit

    user, _, workspace = repo
    _, task = await _run(user, workspace, "add ALPHA")
    worktree = Path(task.worktree)
    (worktree / "__pycache__").mkdir()
    (worktree / "__pycache__" / "alpha.cpython-311.pyc").write_bytes(b"\0")
    (worktree / ".pytest_cache").mkdir()
    (worktree / ".pytest_cache" / "README.md").write_text("cache\n")
    (worktree / "gamma.py").write_text("GAMMA = 3\n")
    made = await sync_to_async(task_commit)(task, "add gamma", agent_config())
    assert git(worktree, "show", "--name-only", "--format=", made) == "gamma.py"


async def test_deleting_a_task_removes_its_worktree_and_keeps_its_branch(repo):
    user, client, workspace = repo
    _, task = await _run(user, workspace, "add ALPHA")
    response = await sync_to_async(client.delete)(f"/api/tasks/{task.pk}")
    assert response.status_code == 200
    assert not Path(task.worktree).exists()
    assert git(workspace.root_dir, "rev-parse", f"refs/heads/{task.branch}") == task.commit


async def test_host_git_never_follows_a_dot_git_file_the_model_rewrote(repo, tmp_path):
    """The worktree is the model's to write, `.git` included: a `.git` pointing at a repository
    of its making, whose config defines a filter that `git add` would run on the host."""
    from apps.tasks.vcs.worktrees import task_commit

    user, _, workspace = repo
    _, task = await _run(user, workspace, "add ALPHA")
    worktree = Path(task.worktree)
    evil = worktree / "evil.git"
    git(tmp_path, "init", "-q", "--bare", str(evil))
    proof = tmp_path / "filter-ran"
    with open(evil / "config", "a") as config:
        config.write(f'[filter "x"]\n\tclean = "touch {proof}; cat"\n')
    (worktree / ".git").write_text(f"gitdir: {evil}\n")
    (worktree / ".gitattributes").write_text("* filter=x\n")
    (worktree / "gamma.py").write_text("GAMMA = 3\n")
    made = await sync_to_async(task_commit)(task, "add gamma", agent_config())
    assert not proof.exists()
    assert made is not None
    shown = git(workspace.root_dir, "show", "--name-only", "--format=", made).split()
    assert "gamma.py" in shown
    assert git(workspace.root_dir, "rev-parse", f"refs/heads/{task.branch}") == made


async def test_a_follow_up_continues_an_expired_branch_and_starts_anew_after_a_merge(repo):
    from apps.tasks.models import Conversation
    from apps.tasks.vcs.worktrees import worktree_remove

    user, client, workspace = repo
    thread = await sync_to_async(Conversation.objects.create)(user=user, workspace=workspace)

    async def turn(goal):
        task = await sync_to_async(make_task)(user, workspace, goal=goal, conversation=thread)
        assert await run_task(task.pk) == "completed"
        return await sync_to_async(Task.objects.select_related("workspace").get)(pk=task.pk)

    first = await turn("add ALPHA")
    await sync_to_async(worktree_remove)(first, agent_config())  # as the reaper's expiry does
    second = await turn("add BETA")
    assert second.branch == first.branch and Path(second.worktree).is_dir()
    assert (Path(second.worktree) / "alpha.py").exists()  # the branch's earlier work is there
    merged = await sync_to_async(client.post)(
        f"/api/tasks/{second.pk}/merge", {}, content_type="application/json"
    )
    assert merged.status_code == 200
    third = await turn("reword the NOTES")
    assert third.branch != first.branch and third.branch.startswith(f"agentkit/{third.pk}-")
    assert third.base_commit == git(workspace.root_dir, "rev-parse", "refs/heads/main")
