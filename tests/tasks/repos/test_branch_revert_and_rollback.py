"""Revert and Team rollback on a repository task's branch (issue 39): Revert restores the files in
the task's worktree and commits the revert on its branch; the base checkout is never written. A
Team phase's `@snapshot` checkpoint is a commit on the branch, and its rollback resets the
worktree to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from apps.tasks.conf import agent_config
from apps.tasks.models import Task
from apps.tasks.run.runner import run_task
from apps.tasks.services import ApplicationError
from apps.tasks.vcs.branch_snapshots import BranchSnapshots
from apps.tasks.workspaces.changes import changes_payload, task_revert
from tests.tasks.factories import make_task
from tests.tasks.repos.support import NOTES, git

pytestmark = pytest.mark.django_db(transaction=True)


async def _run(user, workspace, goal):
    task = await sync_to_async(make_task)(user, workspace, goal=goal)
    assert await run_task(task.pk) == "completed"
    return await sync_to_async(Task.objects.select_related("workspace", "user").get)(pk=task.pk)


async def test_revert_works_on_the_branch_and_is_a_commit(repo):
    user, _, workspace = repo
    task = await _run(user, workspace, "reword the NOTES")
    files = await sync_to_async(changes_payload)(task=task)
    assert [(f["path"], f["state"]) for f in files] == [("notes.txt", "applied")]
    assert await sync_to_async(task_revert)(user=user, task=task) == ["notes.txt"]
    assert (Path(task.worktree) / "notes.txt").read_text() == NOTES
    log = git(task.worktree, "log", "--format=%s|%cn", "-2").splitlines()
    assert log == ["Revert notes.txt|alice", "reword the NOTES|alice"]
    assert git(workspace.root_dir, "status", "--porcelain") == ""  # the base never written
    task = await sync_to_async(Task.objects.select_related("workspace").get)(pk=task.pk)
    assert git(workspace.root_dir, "rev-parse", f"refs/heads/{task.branch}") == task.commit


async def test_revert_after_the_worktree_is_gone_is_refused(repo):
    user, client, workspace = repo
    task = await _run(user, workspace, "reword the NOTES")
    merged = await sync_to_async(client.post)(
        f"/api/tasks/{task.pk}/merge", {}, content_type="application/json"
    )
    assert merged.status_code == 200
    task = await sync_to_async(Task.objects.select_related("workspace").get)(pk=task.pk)
    with pytest.raises(ApplicationError, match=r"worktree of .* is gone"):
        await sync_to_async(task_revert)(user=user, task=task)
    assert "said the agent" in (Path(workspace.root_dir) / "notes.txt").read_text()


async def test_a_team_checkpoint_is_a_commit_and_its_rollback_resets_the_worktree(repo):
    user, _, workspace = repo
    task = await _run(user, workspace, "add ALPHA")
    snapshots = BranchSnapshots(task, agent_config())
    assert snapshots.available()
    worktree = Path(task.worktree)
    (worktree / "draft.py").write_text("DRAFT = 0\n")
    checkpoint = await snapshots.take("build")
    assert git(worktree, "log", "-1", "--format=%s", checkpoint) == (
        "Checkpoint before phase build: add ALPHA"
    )
    (worktree / "alpha.py").write_text("broken\n")
    (worktree / "stray.py").write_text("added by the failed phase\n")
    outcome = await snapshots.restore(checkpoint)
    assert outcome.passed, outcome.output
    assert (worktree / "alpha.py").read_text() == "ALPHA = 1\n"
    assert (worktree / "draft.py").exists() and not (worktree / "stray.py").exists()
    assert git(worktree, "rev-parse", "HEAD") == checkpoint
