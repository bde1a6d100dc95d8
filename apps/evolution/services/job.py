"""The evolution job for one finished task: reflect → lessons → pitfalls → (gated) proposal."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import transaction

from apps.engine.config import EvolutionConfig
from apps.evolution.models import Lesson
from apps.evolution.services.counters import counter_increment
from apps.evolution.services.detector import pitfall_record
from apps.evolution.services.optimizer import prompt_propose
from apps.evolution.services.reflector import is_environment_failure, reflect
from apps.evolution.services.text import UnsafeText, clean_text
from apps.tasks.models import Task, TaskEvent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LearnedLesson:
    category: str
    text: str
    pitfall_id: int | None
    pitfall_status: str
    occurrences: int
    confidence: float


@dataclass(frozen=True)
class EvolutionReport:
    task_id: int
    outcome: str
    already_evolved: bool = False
    environment_failure: bool = False
    lessons: list[LearnedLesson] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # drafts refused by validation
    proposed_prompt_version: int | None = None


def evolve_task(*, task_id: int, config: EvolutionConfig) -> EvolutionReport:
    task = Task.objects.select_related("workspace").get(pk=task_id)
    if task.lessons.exists():
        return EvolutionReport(task.pk, task.status, already_evolved=True)
    events = [
        {"seq": seq, "type": kind, "data": data}
        for seq, kind, data in TaskEvent.objects.filter(task=task)
        .exclude(type__in=("token", "reasoning"))
        .order_by("seq")
        .values_list("seq", "type", "data")
    ]
    if is_environment_failure(events):
        counter_increment("environment_failure_skipped")
        return EvolutionReport(task.pk, task.status, environment_failure=True)
    learned, rejected = [], []
    with transaction.atomic():
        for draft in reflect(events):
            try:
                text = clean_text(draft.text)
                clean_text(draft.trigger), clean_text(draft.advice)
            except UnsafeText as exc:
                log.warning("task %s: lesson refused: %s", task.pk, exc)
                counter_increment("lesson_refused_unsafe")
                rejected.append(str(exc))
                continue
            lesson = Lesson.objects.create(
                workspace_id=task.workspace_id,
                task=task,
                outcome=task.status,
                category=draft.category,
                text=text,
                evidence=draft.evidence,
                actor="skill" if task.skill else "agent",
                actor_name=task.skill or task.mode,
            )
            pitfall = pitfall_record(task=task, draft=draft, lesson=lesson, config=config)
            learned.append(
                LearnedLesson(
                    draft.category,
                    text,
                    pitfall.pk,
                    pitfall.status,
                    pitfall.occurrences,
                    pitfall.confidence,
                )
            )
        version = prompt_propose(task=task, config=config) if learned else None
    counter_increment("evolved")
    return EvolutionReport(
        task.pk,
        task.status,
        lessons=learned,
        rejected=rejected,
        proposed_prompt_version=version.pk if version else None,
    )
