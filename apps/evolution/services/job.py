"""The evolution job for one finished task: reflect → lessons → pitfalls → (gated) proposal.

The reflector is `evolution.reflector`: `rules` (reflector.py) or `llm` (llm_reflector.py, on
the auxiliary model; the rules when it fails). Their lessons pass the same gates."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import transaction

from apps.engine.config import AgentkitConfig, EvolutionConfig
from apps.evolution.models import Lesson
from apps.evolution.services.counters import counter_increment
from apps.evolution.services.detector import pitfall_record
from apps.evolution.services.llm_reflector import reflect_with_llm
from apps.evolution.services.optimizer import prompt_propose
from apps.evolution.services.reflector import LessonDraft, is_environment_failure, reflect
from apps.evolution.text import UnsafeText, clean_text
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


def evolve_task(
    *, task_id: int, config: EvolutionConfig, agent_config: AgentkitConfig | None = None
) -> EvolutionReport:
    """`agent_config`: the whole configuration, for the LLM reflector's model (default: the
    process's agentkit.yaml)."""
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
    drafts = _reflect(task, events, config, agent_config)
    learned, rejected = [], []
    with transaction.atomic():
        for draft in drafts:
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


def _reflect(
    task: Task, events: list[dict], config: EvolutionConfig, agent_config: AgentkitConfig | None
) -> list[LessonDraft]:
    """The lessons of `evolution.reflector`: the LLM's, else (or when it fails) the rules'."""
    if config.reflector == "llm":
        if agent_config is None:
            from apps.tasks.conf import agent_config as load

            agent_config = load()
        drafts = reflect_with_llm(events, goal=task.goal, outcome=task.status, config=agent_config)
        if drafts is not None:
            counter_increment("llm_reflections")
            return drafts
        counter_increment("llm_reflector_fallback")
    return reflect(events)
