"""What agentkit learns from finished tasks. Every artifact carries its workspace and its actor
(who produced it: the agent, an expert, a skill — or an admin who edited it) and the tasks it came
from. Text is validated (apps/evolution/text.py) before it is stored."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from apps.evolution.text import UnsafeText, clean_text
from apps.tasks.models import Task, Workspace


class Actor(models.TextChoices):
    AGENT = "agent"
    EXPERT = "expert"
    SKILL = "skill"


class Severity(models.TextChoices):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


SEVERITY_RANK = {Severity.LOW: 0, Severity.MEDIUM: 1, Severity.HIGH: 2}


class Category(models.TextChoices):
    VERIFICATION_FAILURE = "verification_failure"
    GIVE_UP = "give_up"
    TOOL_ERROR = "tool_error"
    PHASE_VIOLATION = "phase_violation"
    LOOP = "loop"
    TIMEOUT = "timeout"
    SUCCESS_PATTERN = "success_pattern"  # what worked (the LLM reflector, sampled successes)


class PitfallStatus(models.TextChoices):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    RETIRED = "retired"


class PromptStatus(models.TextChoices):
    PROPOSED = "proposed"
    APPROVED = "approved"
    ACTIVE = "active"
    REJECTED = "rejected"


class Pitfall(models.Model):
    """A mistake seen before in a workspace: what triggers it and what to do instead."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="pitfalls")
    category = models.CharField(max_length=32, choices=Category.choices)
    trigger = models.TextField(help_text="The situation or symptom (what went wrong).")
    advice = models.TextField(help_text="What to do instead.")
    # Goals (and skill) of the tasks it came from: retrieval matches new goals against them.
    context = models.TextField(blank=True, default="")
    mode = models.CharField(max_length=20, blank=True, default="")
    skill = models.CharField(max_length=100, blank=True, default="")
    severity = models.CharField(max_length=10, choices=Severity.choices)
    confidence = models.FloatField(default=0.0)
    occurrences = models.PositiveIntegerField(default=1)
    status = models.CharField(
        max_length=12, choices=PitfallStatus.choices, default=PitfallStatus.CANDIDATE
    )
    observe_only = models.BooleanField(
        default=True, help_text="Recorded only: the prompt optimizer does not consume it."
    )
    shared = models.BooleanField(
        default=False,
        help_text="Offered to other workspaces that opted in (only when this workspace opted in).",
    )
    actor = models.CharField(max_length=10, choices=Actor.choices, default=Actor.AGENT)
    actor_name = models.CharField(max_length=100, blank=True, default="")
    source_tasks = models.ManyToManyField(Task, related_name="pitfalls", blank=True)
    hit_count = models.PositiveIntegerField(default=0, help_text="Times injected into a prompt.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["workspace", "category", "status"])]

    def __str__(self) -> str:
        return f"{self.get_category_display()}: {self.trigger[:60]}"

    def clean(self) -> None:
        errors = {}
        for field in ("trigger", "advice"):
            try:
                setattr(self, field, clean_text(getattr(self, field)))
            except UnsafeText as exc:
                errors[field] = str(exc)
        if self.shared and self.workspace_id and not self.workspace.share_evolution:
            errors["shared"] = (
                "This workspace has not opted in to sharing: tick 'share evolution' on the "
                "workspace first."
            )
        if errors:
            raise ValidationError(errors)


class Lesson(models.Model):
    """One thing the reflector learned from one task, with the events that show it."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="lessons")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="lessons")
    outcome = models.CharField(max_length=32)
    category = models.CharField(max_length=32, choices=Category.choices)
    text = models.TextField()
    evidence = models.JSONField(default=list, help_text="seq numbers of the task's events.")
    actor = models.CharField(max_length=10, choices=Actor.choices, default=Actor.AGENT)
    actor_name = models.CharField(max_length=100, blank=True, default="")
    pitfall = models.ForeignKey(
        Pitfall, on_delete=models.SET_NULL, null=True, blank=True, related_name="lessons"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"#{self.task_id} {self.category}: {self.text[:60]}"


class PromptVersion(models.Model):
    """A proposed addendum to a skill's, expert's or mode's prompt, backed by pitfalls."""

    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="prompt_versions"
    )
    target_kind = models.CharField(
        max_length=10, choices=[("skill", "skill"), ("expert", "expert"), ("mode", "mode")]
    )
    target_name = models.CharField(max_length=100)
    text = models.TextField(help_text="The addendum to the target's prompt.")
    status = models.CharField(
        max_length=10, choices=PromptStatus.choices, default=PromptStatus.PROPOSED
    )
    evidence_pitfalls = models.ManyToManyField(Pitfall, related_name="prompt_versions")
    actor = models.CharField(max_length=10, choices=Actor.choices, default=Actor.AGENT)
    actor_name = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.target_kind}:{self.target_name} ({self.status})"

    def clean(self) -> None:
        try:
            self.text = clean_text(self.text, limit=2000)
        except UnsafeText as exc:
            raise ValidationError({"text": str(exc)}) from exc


class PitfallInjection(models.Model):
    """A pitfall put into a task's prompt; `outcome` is the task's final status."""

    pitfall = models.ForeignKey(Pitfall, on_delete=models.CASCADE, related_name="injections")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="pitfall_injections")
    outcome = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["pitfall", "task"], name="pitfall_injection_unique")
        ]


class PromptRun(models.Model):
    """A task that ran with a PromptVersion (the active one, or an approved candidate under
    A/B), and how it ended: what the comparison in admin is computed from."""

    class Arm(models.TextChoices):
        ACTIVE = "active"
        CANDIDATE = "candidate"

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="prompt_run")
    version = models.ForeignKey(PromptVersion, on_delete=models.CASCADE, related_name="runs")
    arm = models.CharField(max_length=10, choices=Arm.choices)
    outcome = models.CharField(max_length=32, blank=True, default="")
    verification_passed = models.BooleanField(null=True, blank=True)
    reflections = models.PositiveIntegerField(default=0)
    tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class EvolutionCounter(models.Model):
    """Counts of what scheduling did (scheduled, sampled out, dropped: backpressure, redis_down)."""

    name = models.CharField(max_length=50, unique=True)
    value = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} = {self.value}"
