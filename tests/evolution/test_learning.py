"""Seed 000 U6 / AE3 through the runner, a real Redis and a real RQ worker: a task that gives up
after its reflections is scheduled at its end, the worker's job turns its events into lessons,
and the lessons grow one pitfall per symptom."""

from __future__ import annotations

import pytest

from apps.evolution.models import Lesson, Pitfall, PitfallStatus, PromptVersion
from tests.evolution.conftest import GOAL, counter, drain, gives_up_config, restore_demo, run
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)


def give_up_once(user, workspace, root):
    restore_demo(root)
    task = make_task(user, workspace, goal=GOAL, mode="plan_exec")
    assert run(task) == "gave_up_after_reflections"
    return task


def test_task_that_gives_up_is_learned_from_by_the_worker(demo, config_file, evolution_queue):
    user, workspace, root = demo
    config_file(gives_up_config())
    task = give_up_once(user, workspace, root)

    assert evolution_queue.job_ids == [f"evolve-task-{task.pk}"]
    assert drain(evolution_queue) == 1

    lessons = list(Lesson.objects.filter(task=task).select_related("pitfall"))
    give_up = next(lesson for lesson in lessons if lesson.category == "give_up")
    assert give_up.outcome == "gave_up_after_reflections"
    assert give_up.text.startswith("verification failed: ")
    assert give_up.evidence and give_up.workspace_id == workspace.pk
    assert (give_up.actor, give_up.actor_name) == ("agent", "plan_exec")
    pitfall = give_up.pitfall
    assert pitfall.workspace_id == workspace.pk and pitfall.severity == "high"
    assert pitfall.status == PitfallStatus.CANDIDATE  # one occurrence: below min_confidence 0.5
    assert pitfall.occurrences == 1 and pitfall.confidence == 0.35
    assert GOAL in pitfall.context
    assert counter("scheduled") == 1 and counter("evolved") == 1


def test_the_same_failure_three_times_yields_one_pitfall_with_occurrences_3(
    demo, config_file, evolution_queue
):
    user, workspace, root = demo
    config_file(gives_up_config())
    tasks = []
    for _ in range(3):
        tasks.append(give_up_once(user, workspace, root))
        assert drain(evolution_queue) == 1

    pitfalls = list(Pitfall.objects.filter(category="give_up"))
    assert len(pitfalls) == 1
    pitfall = pitfalls[0]
    assert pitfall.occurrences == 3
    assert pitfall.confidence == 0.65 and pitfall.status == PitfallStatus.ACTIVE
    assert sorted(pitfall.source_tasks.values_list("pk", flat=True)) == [t.pk for t in tasks]
    # every symptom is one pitfall seen three times; none is duplicated
    rows = list(Pitfall.objects.values_list("trigger", "occurrences"))
    assert len(rows) == len({trigger for trigger, _ in rows})
    assert all(occurrences == 3 for _, occurrences in rows)
    # observe_only is on by default: the optimizer proposed nothing
    assert not PromptVersion.objects.exists()
