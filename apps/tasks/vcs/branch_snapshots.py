"""`@snapshot` of a Team task on a repository workspace (docs/repositories.md): the checkpoint
before a phase is a commit on the task's branch, its rollback a reset of the worktree to it."""

from __future__ import annotations

from pathlib import Path

from asgiref.sync import sync_to_async
from django.utils import timezone

from apps.engine.team.rollback import CommandOutcome, SnapshotError
from apps.tasks.models import Task
from apps.tasks.vcs import git
from apps.tasks.vcs.worktrees import task_commit, timeout_of, worktree_env


class BranchSnapshots:
    """`@snapshot` of a Team task on a repository workspace (engine_build.build_team gives it
    to the orchestrator): the checkpoint before a phase is a commit on the task's branch, made
    with git on the host (the sandbox cannot write the repository's shared .git), and a failed
    phase's rollback resets the worktree to it (files the phase added go too; ignored ones
    stay)."""

    def __init__(self, task: Task, config):
        self.task, self.config = task, config

    def available(self) -> bool:
        return bool(self.task.worktree) and Path(self.task.worktree).is_dir()

    def ref(self, phase_id: str) -> str:
        return f"refs/heads/{self.task.branch}"

    async def take(self, phase_id: str) -> str:
        def checkpoint() -> str:
            task_commit(
                self.task, f"Checkpoint before phase {phase_id}: {self.task.goal}", self.config
            )
            return self.task.commit

        try:
            return await sync_to_async(checkpoint, thread_sensitive=False)()
        except (git.GitError, OSError) as exc:
            raise SnapshotError(
                f"could not commit the checkpoint before phase {phase_id}: {exc}"
            ) from None

    async def restore(self, commit: str):
        timeout = timeout_of(self.config)

        def reset() -> CommandOutcome:
            started = timezone.now()
            try:
                env = worktree_env(self.task, timeout)
                where = self.task.worktree
                git.run(["reset", "--hard", "--quiet", commit], where, timeout=timeout, env=env)
                git.run(["clean", "-fdq"], where, timeout=timeout, env=env)
                head = git.out(["rev-parse", "HEAD"], where, timeout=timeout, env=env)
            except git.GitError as exc:
                return CommandOutcome("@snapshot", False, exc.code or -1, str(exc))
            Task.objects.filter(
                workspace_id=self.task.workspace_id, branch=self.task.branch
            ).update(commit=head)
            self.task.commit = head
            seconds = (timezone.now() - started).total_seconds()
            return CommandOutcome(
                "@snapshot", True, 0, f"reset {self.task.branch} to {commit[:10]}", duration=seconds
            )

        return await sync_to_async(reset, thread_sensitive=False)()
