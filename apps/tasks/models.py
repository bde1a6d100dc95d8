from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


class Workspace(models.Model):
    """A directory on disk the agent works in, and the people allowed to use it."""

    name = models.CharField(max_length=100, unique=True)
    root_dir = models.CharField(
        max_length=1024, help_text="Absolute path of the directory the agent reads and edits."
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, related_name="workspaces", blank=True
    )
    verification_commands = models.JSONField(
        default=list,
        blank=True,
        help_text="Commands run at the final answer for non-Python projects, e.g. "
        '["npm test"]. Python projects default to pytest + ruff.',
    )
    share_evolution = models.BooleanField(
        default=False,
        help_text="Opt in to sharing pitfalls and prompt improvements with other workspaces "
        "that also opted in.",
    )
    # A repository workspace (docs/repositories.md): `base_branch` set. Each Agent, Plan & verify
    # or Team task works in its own git worktree on a branch made from the base branch.
    base_branch = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="The branch tasks start from and merge into; blank: a plain directory.",
    )
    git_url = models.CharField(
        max_length=1024,
        blank=True,
        default="",
        help_text="The URL it was cloned from (without credentials), if it was cloned.",
    )
    push_credential_env = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text="Name of the server environment variable that holds the push credential: a "
        "token for https remotes, the path of a private key for ssh ones. Set by admins only.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_repository(self) -> bool:
        return bool(self.base_branch)

    def clean(self) -> None:
        if self.push_credential_env and not re.fullmatch(
            r"[A-Z_][A-Z0-9_]*", self.push_credential_env
        ):
            raise ValidationError(
                {"push_credential_env": "The NAME of an environment variable, e.g. GIT_TOKEN."}
            )
        if not Path(self.root_dir).is_absolute():
            raise ValidationError({"root_dir": "Give an absolute path, e.g. /srv/projects/app."})
        if not isinstance(self.verification_commands, list) or not all(
            isinstance(cmd, str) and cmd.strip() for cmd in self.verification_commands
        ):
            raise ValidationError(
                {"verification_commands": 'A JSON list of command strings, e.g. ["npm test"].'}
            )


class TaskStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_REVIEW = "awaiting_review"
    COMPLETED = "completed"
    FAILED = "failed"
    GAVE_UP = "gave_up_after_reflections"
    CANCELLED = "cancelled"
    PARKED = "parked"


FINAL_STATUSES = frozenset(
    {TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.GAVE_UP, TaskStatus.CANCELLED}
)


class Conversation(models.Model):
    """A chat thread: its tasks run one after the other in one workspace, and each new task gets
    the earlier turns as history. It belongs to the user who started it."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["user", "-updated_at"])]

    def __str__(self) -> str:
        return f"conversation #{self.pk} {self.title[:40]}"


class Task(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="tasks")
    # The conversation this task continues (null for tasks created before conversations existed).
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="tasks"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tasks"
    )
    mode = models.CharField(max_length=20)
    skill = models.CharField(max_length=100, blank=True, default="")
    # A model alias of agentkit.yaml for this task (run_tasks --model); blank: the skill's, else
    # llm.main.
    model = models.CharField(max_length=100, blank=True, default="")
    goal = models.TextField()
    status = models.CharField(max_length=32, choices=TaskStatus.choices, default=TaskStatus.QUEUED)
    result = models.TextField(blank=True, default="")
    error = models.JSONField(null=True, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    cost = models.FloatField(default=0.0)
    # What the run came to (TaskResult.outcome): verified | unverified | no_changes | the
    # failure's error code; "" before the end (selectors.task_outcome reads it)
    outcome = models.CharField(max_length=64, blank=True, default="")
    client_msg_id = models.CharField(max_length=100, blank=True, default="")
    # Failure handling (apps/engine/failure/fallback.py): what a task ended in Emergency changed, the
    # failure's own text (scrubbed; its owner only), and the failed task a retry repeats.
    salvage = models.JSONField(null=True, blank=True)
    original_error = models.TextField(blank=True, default="")
    retry_of = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="retries"
    )
    last_seq = models.PositiveIntegerField(default=0)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # The run that holds the task (apps/tasks/dispatch/liveness.py): "" when none; its process touches
    # `heartbeat_at` every few seconds. A task `queued` or `running` whose heartbeat is older than
    # `executor.orphan_after_seconds` has no live run: the reaper ends or resumes it (reaper.py).
    run_owner = models.CharField(max_length=80, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # How many times the reaper handed the task to a new run after its run died.
    orphaned = models.PositiveSmallIntegerField(default=0)
    # A task on a repository workspace (apps/tasks/vcs/worktrees.py): its branch, the branch's
    # newest commit, the base commit it was made from, and its worktree ("" once removed).
    branch = models.CharField(max_length=200, blank=True, default="")
    commit = models.CharField(max_length=64, blank=True, default="")
    base_commit = models.CharField(max_length=64, blank=True, default="")
    worktree = models.CharField(max_length=1024, blank=True, default="")
    # A queued task whose RQ job went back to the queue because another task holds its workspace
    # (or its conversation's earlier turn runs): that task; its end queues this one's next job
    # (apps/tasks/dispatch/deferral.py). Null when it waits for nothing.
    deferred_behind = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # When `events.retention` folded its token events into one per step (ops/retention.py).
    events_folded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "-created_at"]),
            # The re-send check of every created task (services.task_create).
            models.Index(fields=["user", "client_msg_id"], name="tasks_task_user_client_msg"),
            # The reaper's look for tasks without a live run (reaper.py).
            models.Index(fields=["status", "heartbeat_at"], name="tasks_task_status_beat"),
            # Retention's look for finished tasks to fold (ops/retention.py).
            models.Index(fields=["events_folded_at", "finished_at"], name="tasks_task_fold"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.goal[:40]}"

    @property
    def is_finished(self) -> bool:
        return self.status in FINAL_STATUSES


class TaskEvent(models.Model):
    """One event of a task, in the WebSocket event shape. The source of truth: sockets replay
    from here after a reconnect."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    data = models.JSONField(default=dict)
    ts = models.DateTimeField()

    class Meta:
        ordering = ["task", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["task", "seq"], name="task_event_seq_unique")
        ]
        # The dashboard asks "did this task have a verification_result / reflection event".
        indexes = [models.Index(fields=["task", "type"], name="task_event_task_type")]

    def as_message(self) -> dict:
        return {
            "type": self.type,
            "task_id": self.task_id,
            "seq": self.seq,
            "ts": self.ts.isoformat(),
            "data": self.data,
        }


class WorkspaceLease(models.Model):
    """The one run that may change a working tree now (react, plan_exec, team_collab; apps/tasks/
    leases.py): a plain workspace's directory, or one task branch's worktree of a repository
    workspace (`key`). It lives as long as its task's run: a holder that ended, or whose
    heartbeat went stale (its process died), gives it up to the next waiting task."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="leases")
    key = models.CharField(max_length=200, unique=True)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="leases")
    acquired_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.workspace} held by task #{self.task_id}"


class ApiToken(models.Model):
    """A per-user bearer token for the JSON API. Only a SHA-256 hash is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, default="")
    prefix = models.CharField(max_length=12, help_text="First characters, to recognise a token.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class EvaluationRun(models.Model):
    """One `run_tasks --suite` evaluation (apps/tasks/batch/evaluation.py), stored when the
    command ends, also after Ctrl-C (`interrupted`): what ran, the per-mode summary
    (`evaluation.mode_summary` per mode) and one row per task, mode and repeat (`outcomes`:
    id, mode, repeat, task_id, status, hidden_tests, solved, cost, tokens, steps, detail).
    The Evaluations page (apps/dashboard) shows it to the user it ran as."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="evaluation_runs"
    )
    suite = models.CharField(max_length=40)
    modes = models.JSONField(default=list)
    model = models.CharField(max_length=200, blank=True, default="")
    repeat = models.PositiveSmallIntegerField(default=1)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    interrupted = models.BooleanField(default=False)
    summary = models.JSONField(default=dict)
    outcomes = models.JSONField(default=list)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["user", "-started_at"], name="tasks_evalrun_user_started")]

    def __str__(self) -> str:
        return f"evaluation #{self.pk} {self.suite} ({', '.join(self.modes)})"

    @property
    def mode_summaries(self) -> list[tuple[str, dict]]:
        """(mode, summary) in the run's order (PostgreSQL's jsonb keeps no key order)."""
        return [(mode, self.summary.get(mode, {})) for mode in self.modes]

    @property
    def wall_seconds(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()
