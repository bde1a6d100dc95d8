"""Specs: the plan a planner drafts for a task (one row per revision), its phases, and the review a
person gives it before execution. The draft itself is `apps.engine.plan.spec.SpecDraft`, stored as JSON
(`Spec.draft`) and mirrored into `SpecPhase` rows that track each phase's progress."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SpecStatus(models.TextChoices):
    DRAFT = "draft"
    PENDING_REVIEW = "pending_review"
    CONFIRMED = "confirmed"
    REJECTED = "rejected"
    PARKED = "parked"
    EXECUTING = "executing"
    DONE = "done"
    FAILED = "failed"


class PhaseStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"
    SKIPPED = "skipped"


class ReviewDecision(models.TextChoices):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    REJECTED = "rejected"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class Spec(models.Model):
    """One revision of a task's plan. A rejection keeps the row (status rejected, `feedback` = what
    the reviewer asked for) and the planner drafts the next revision from it."""

    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="specs")
    workspace = models.ForeignKey("tasks.Workspace", on_delete=models.CASCADE, related_name="specs")
    revision = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=20, choices=SpecStatus.choices, default=SpecStatus.DRAFT)
    goal = models.TextField()
    draft = models.JSONField(default=dict, help_text="SpecDraft.model_dump() of this revision.")
    feedback = models.TextField(
        blank=True, default="", help_text="The rejection feedback that produced the next revision."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "revision"], name="spec_unique_task_revision")
        ]
        indexes = [models.Index(fields=["status", "workspace"])]

    def __str__(self) -> str:
        return f"spec #{self.pk} r{self.revision} of task #{self.task_id}"


class SpecPhase(models.Model):
    spec = models.ForeignKey(Spec, on_delete=models.CASCADE, related_name="phases")
    position = models.PositiveIntegerField(default=0)
    phase_id = models.CharField(max_length=40)
    title = models.CharField(max_length=200)
    role = models.CharField(max_length=60, default="coder")
    instructions = models.TextField(blank=True, default="")
    depends_on = models.JSONField(default=list, blank=True)
    validation_command = models.TextField(blank=True, default="")
    rollback_command = models.TextField(blank=True, default="")
    status = models.CharField(
        max_length=20, choices=PhaseStatus.choices, default=PhaseStatus.PENDING
    )

    class Meta:
        ordering = ["spec_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["spec", "phase_id"], name="specphase_unique_phase_id")
        ]

    def __str__(self) -> str:
        return f"{self.phase_id} ({self.role})"


class SpecReview(models.Model):
    """A request for a person's decision on one spec revision; resolved exactly once."""

    spec = models.ForeignKey(Spec, on_delete=models.CASCADE, related_name="reviews")
    review_id = models.CharField(max_length=64, unique=True)
    decision = models.CharField(
        max_length=20, choices=ReviewDecision.choices, default=ReviewDecision.PENDING
    )
    feedback = models.TextField(blank=True, default="")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="spec_reviews",
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]

    def __str__(self) -> str:
        return f"{self.review_id} ({self.decision})"

    @property
    def is_resolved(self) -> bool:
        return self.decision != ReviewDecision.PENDING


class Checkpoint(models.Model):
    """A spec phase that ended in a team_collab run (apps/engine/team/orchestrator.py): what a run
    resumed after a restart needs to skip it. Saved only when the phase completed, or failed
    with no rollback or a rollback that worked (seed 001 R21). A plan_exec run saves one when
    its spec is confirmed (`spec`) and one per engine phase it leaves (planning, building...,
    with the phase counters; apps/engine/loop/resume.py)."""

    spec = models.ForeignKey(Spec, on_delete=models.CASCADE, related_name="checkpoints")
    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="checkpoints")
    phase_id = models.CharField(max_length=40)
    status = models.CharField(max_length=20, choices=PhaseStatus.choices)
    counters = models.JSONField(
        default=dict, blank=True, help_text="steps, usage, cost, final answer, phase counters."
    )
    snapshot_ref = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["task", "spec"])]

    def __str__(self) -> str:
        return f"checkpoint {self.phase_id} ({self.status}) of task #{self.task_id}"
