"""PromptOptimizer: proposes a PromptVersion (status `proposed`, for an admin to approve) for a
skill or mode once `evolution.min_examples` active pitfalls of that target agree — never while
`evolution.observe_only` is on, and never from pitfalls recorded as observe-only. Nothing it
writes reaches a prompt without an admin's decision."""

from __future__ import annotations

from apps.engine.config import EvolutionConfig
from apps.evolution.models import (
    SEVERITY_RANK,
    Pitfall,
    PitfallStatus,
    PromptStatus,
    PromptVersion,
)
from apps.evolution.text import PROMPT_TEXT_MAX, clean_text
from apps.tasks.models import Task


def prompt_propose(*, task: Task, config: EvolutionConfig) -> PromptVersion | None:
    if config.observe_only:
        return None
    target_kind, target_name = ("skill", task.skill) if task.skill else ("mode", task.mode)
    evidence = list(
        Pitfall.objects.filter(
            workspace_id=task.workspace_id,
            status=PitfallStatus.ACTIVE,
            observe_only=False,
            confidence__gte=config.min_confidence,
            **({"skill": task.skill} if task.skill else {"mode": task.mode, "skill": ""}),
        ).order_by("-confidence", "-occurrences", "id")
    )
    if len(evidence) < config.min_examples:
        return None
    pending = PromptVersion.objects.filter(
        workspace_id=task.workspace_id,
        target_kind=target_kind,
        target_name=target_name,
        status=PromptStatus.PROPOSED,
    )
    if pending.exists():  # one open proposal per target: the admin decides first
        return None
    evidence.sort(key=lambda p: (-SEVERITY_RANK[p.severity], -p.occurrences, p.id))
    lines = [f"- {p.advice} (seen {p.occurrences}x: {p.trigger})" for p in evidence]
    text = clean_text(
        "Mistakes seen repeatedly in this workspace, and what to do instead:\n" + "\n".join(lines),
        limit=PROMPT_TEXT_MAX,
    )
    version = PromptVersion.objects.create(
        workspace_id=task.workspace_id,
        target_kind=target_kind,
        target_name=target_name,
        text=text,
        actor="skill" if task.skill else "agent",
        actor_name=task.skill or task.mode,
    )
    version.evidence_pitfalls.set(evidence)
    return version
