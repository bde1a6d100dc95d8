"""PitfallDetector: a lesson joins the most similar pitfall of its workspace (occurrences and
confidence grow, no duplicates) or starts a candidate. Only a pitfall whose confidence reaches
`evolution.min_confidence` becomes active, and so retrievable."""

from __future__ import annotations

from difflib import SequenceMatcher

from django.utils import timezone

from apps.engine.config import EvolutionConfig
from apps.evolution.models import (
    SEVERITY_RANK,
    Category,
    Lesson,
    Pitfall,
    PitfallStatus,
)
from apps.evolution.services.reflector import LessonDraft
from apps.evolution.text import clean_text
from apps.tasks.models import Task

MERGE_SIMILARITY = 0.85  # difflib ratio of the lower-cased triggers
CANDIDATES_SCANNED = 500
CONTEXT_MAX = 1000
# categories that describe the same symptom (a give-up is a verification failure that stayed)
FAMILY = {
    Category.GIVE_UP: (Category.GIVE_UP, Category.VERIFICATION_FAILURE),
    Category.VERIFICATION_FAILURE: (Category.GIVE_UP, Category.VERIFICATION_FAILURE),
}


def confidence_for(occurrences: int) -> float:
    """0.35 for one occurrence, +0.15 for each repeat, at most 0.95."""
    return round(min(0.95, 0.35 + 0.15 * (occurrences - 1)), 2)


def most_similar_pitfall(*, workspace_id: int, category: str, trigger: str) -> Pitfall | None:
    family = FAMILY.get(category, (category,))
    wanted = trigger.lower()
    best, best_ratio = None, MERGE_SIMILARITY
    candidates = Pitfall.objects.filter(workspace_id=workspace_id, category__in=family).order_by(
        "-updated_at"
    )[:CANDIDATES_SCANNED]
    for pitfall in candidates:
        ratio = SequenceMatcher(None, wanted, pitfall.trigger.lower()).ratio()
        if ratio >= best_ratio:
            best, best_ratio = pitfall, ratio
    return best


def pitfall_record(
    *, task: Task, draft: LessonDraft, lesson: Lesson, config: EvolutionConfig
) -> Pitfall:
    """Merge the lesson into a pitfall (or create one); returns it, saved."""
    trigger, advice = clean_text(draft.trigger), clean_text(draft.advice)
    now = timezone.now()
    pitfall = most_similar_pitfall(
        workspace_id=task.workspace_id, category=draft.category, trigger=trigger
    )
    if pitfall is None:
        pitfall = Pitfall(
            workspace_id=task.workspace_id,
            category=draft.category,
            trigger=trigger,
            advice=advice,
            context=_context("", task),
            mode=task.mode,
            skill=task.skill,
            severity=draft.severity,
            occurrences=1,
            confidence=confidence_for(1),
            observe_only=config.observe_only,
            actor=lesson.actor,
            actor_name=lesson.actor_name,
            last_seen_at=now,
        )
    else:
        pitfall.occurrences += 1
        pitfall.confidence = max(pitfall.confidence, confidence_for(pitfall.occurrences))
        pitfall.context = _context(pitfall.context, task)
        pitfall.last_seen_at = now
        if SEVERITY_RANK[draft.severity] > SEVERITY_RANK[pitfall.severity]:
            pitfall.severity = draft.severity
        if draft.category == Category.GIVE_UP:
            pitfall.category, pitfall.advice = draft.category, advice
    if pitfall.status == PitfallStatus.CANDIDATE and pitfall.confidence >= config.min_confidence:
        pitfall.status = PitfallStatus.ACTIVE
    pitfall.save()
    pitfall.source_tasks.add(task)
    lesson.pitfall = pitfall
    lesson.save(update_fields=["pitfall"])
    return pitfall


def _context(existing: str, task: Task) -> str:
    """Goals (and skill) of the source tasks, newest last, capped: what retrieval matches."""
    line = " ".join(filter(None, [f"@{task.skill}" if task.skill else "", task.goal.strip()]))
    line = line[:300]
    if line.lower() in existing.lower():
        return existing
    joined = f"{existing}\n{line}".strip()
    return joined[-CONTEXT_MAX:]
