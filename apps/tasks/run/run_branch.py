"""A run on a repository workspace, for runner.py: its worktree before the engine starts, and its
commits as it goes (worktrees.py does the git work).

    committer = await enter_worktree(task, config, recorder)   # None: a plain workspace, or
                                                               # direct_chat (reads the base)
    await committer.at(event.type, data)                       # before each event is stored

Commit points: a Team phase that completed (`phase_completed`: "<phase title>: <goal>"), a
Plan & verify phase the run passed forward (`phase_changed` planning → building → verification
→ delivery: "<Phase>: <goal>"), and the end of every run (`task_finished`: the goal). A commit
that fails is logged and the run goes on: the files stay in the worktree for the next commit.
"""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async

from apps.tasks.dispatch.leases import LEASED_MODES
from apps.tasks.events.recorder import EventRecorder
from apps.tasks.models import Task
from apps.tasks.run.engine_build import RunAborted
from apps.tasks.vcs.worktrees import WorktreeRefused, task_commit, task_worktree_ensure

log = logging.getLogger(__name__)

PLAN_ORDER = ("planning", "building", "verification", "delivery")


def commit_message(kind: str, data: dict, goal: str) -> str | None:
    """The commit an event asks for on the task's branch, or None."""
    if kind == "phase_completed" and not data.get("resumed"):
        return f"{data.get('title') or data.get('phase_id') or 'phase'}: {goal}"
    if kind == "phase_changed":
        before, now = data.get("previous"), data.get("phase")
        forward = before in PLAN_ORDER and now in PLAN_ORDER
        if forward and PLAN_ORDER.index(now) > PLAN_ORDER.index(before):
            return f"{str(before).capitalize()}: {goal}"
        return None
    if kind == "task_finished":
        status = data.get("status")
        return goal if status == "completed" else f"{goal}\n\n(the task ended {status})"
    return None


class BranchCommitter:
    def __init__(self, task: Task, config):
        self.task, self.config = task, config

    async def at(self, kind: str, data: dict) -> None:
        message = commit_message(kind, data or {}, self.task.goal)
        if message is None:
            return
        try:
            await sync_to_async(task_commit, thread_sensitive=False)(
                self.task, message, self.config
            )
        except Exception:
            log.warning("task %s: its changes could not be committed", self.task.pk, exc_info=True)


async def enter_worktree(task: Task, config, recorder: EventRecorder) -> BranchCommitter | None:
    """The task's worktree (made or continued) when it runs on a repository workspace in a mode
    that writes; raises RunAborted when it cannot be made."""
    if not task.workspace.is_repository or task.mode not in LEASED_MODES:
        return None
    try:
        path = await sync_to_async(task_worktree_ensure, thread_sensitive=False)(task, config)
    except WorktreeRefused as refused:
        raise RunAborted(
            refused.error_code,
            str(refused),
            ["Merge or discard finished tasks' branches, then send the message again."],
        ) from None
    recorder.paths = [*recorder.paths, str(path)]
    return BranchCommitter(task, config)
