"""Seed 000 U2 / KTD-3, KTD-4, KTD-10: evolution is scheduled from the runner's lifecycle hooks at
every task end — failures always, successes sampled by a stable hash, direct_chat never — on RQ
queue `evolution`; backpressure drops and counts; Redis down is logged, counted, and harmless."""

from __future__ import annotations

import logging

import pytest

from apps.engine.config import EvolutionConfig
from apps.evolution.models import Lesson
from apps.evolution.services.scheduling import (
    evolution_decision,
    evolution_schedule,
    success_sampled,
)
from tests.evolution.conftest import (
    GOAL,
    counter,
    drain,
    gives_up_config,
    run,
    shipped_with,
)
from tests.support import free_port
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_success_sampling_is_stable_per_task_and_close_to_the_rate():
    rate = 0.1
    first = [success_sampled(task_id, rate) for task_id in range(1, 20_001)]
    again = [success_sampled(task_id, rate) for task_id in range(1, 20_001)]
    assert first == again
    assert 0.09 < sum(first) / len(first) < 0.11
    assert not any(success_sampled(task_id, 0.0) for task_id in range(1, 1000))
    assert all(success_sampled(task_id, 1.0) for task_id in range(1, 1000))


@pytest.mark.parametrize(
    ("mode", "outcome", "rate", "expected"),
    [
        ("plan_exec", "gave_up_after_reflections", 0.0, "schedule"),
        ("react", "failed", 0.0, "schedule"),
        ("react", "completed", 1.0, "schedule"),
        ("react", "completed", 0.0, "not_sampled"),
        ("react", "cancelled", 1.0, "not_finished"),
        ("direct_chat", "failed", 1.0, "direct_chat"),
        ("direct_chat", "completed", 1.0, "direct_chat"),
    ],
)
def test_failures_always_successes_sampled_direct_chat_never(mode, outcome, rate, expected):
    config = EvolutionConfig(success_sample_rate=rate)
    assert evolution_decision(task_id=7, mode=mode, outcome=outcome, config=config) == expected
    disabled = EvolutionConfig(enabled=False)
    assert evolution_decision(task_id=7, mode=mode, outcome=outcome, config=disabled) == "disabled"


def test_successful_task_is_scheduled_only_when_sampled(demo, config_file, evolution_queue):
    user, workspace, _ = demo
    config_file(shipped_with(rate=("success_sample_rate: 0.1", "success_sample_rate: 0.0")))
    task = make_task(user, workspace, goal=GOAL, mode="react")
    assert run(task) == "completed"
    assert evolution_queue.count == 0 and counter("scheduled") == 0

    config_file(shipped_with(rate=("success_sample_rate: 0.1", "success_sample_rate: 1.0")))
    task = make_task(user, workspace, goal=GOAL, mode="react")
    assert run(task) == "completed"
    assert evolution_queue.job_ids == [f"evolve-task-{task.pk}"]
    drain(evolution_queue)
    assert counter("evolved") == 1  # the job ran; a clean success teaches nothing here
    assert not Lesson.objects.filter(task=task, category="give_up").exists()


def test_direct_chat_task_never_schedules_evolution(demo, config_file, evolution_queue):
    user, workspace, _ = demo
    config_file(shipped_with(rate=("success_sample_rate: 0.1", "success_sample_rate: 1.0")))
    task = make_task(user, workspace, goal="hello", mode="direct_chat")
    assert run(task) == "completed"
    assert evolution_queue.count == 0 and counter("scheduled") == 0


def test_past_max_pending_the_job_is_dropped_logged_and_counted(
    demo, config_file, evolution_queue, caplog
):
    user, workspace, _ = demo
    config_file(gives_up_config({"pending": ("max_pending: 1000", "max_pending: 1")}))
    first = make_task(user, workspace, goal=GOAL, mode="react", status="failed")
    assert evolution_schedule(task_id=first.pk, outcome="failed") == "scheduled"
    second = make_task(user, workspace, goal=GOAL, mode="plan_exec")
    with caplog.at_level(logging.WARNING, logger="apps.evolution"):
        assert run(second) == "gave_up_after_reflections"  # the task itself is unaffected
    assert evolution_queue.job_ids == [f"evolve-task-{first.pk}"]
    assert counter("dropped_backpressure") == 1
    assert "max_pending" in caplog.text and str(second.pk) in caplog.text


def test_redis_down_is_logged_and_counted_and_the_task_still_ends(
    demo, config_file, monkeypatch, caplog
):
    import django_rq.settings

    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    monkeypatch.setitem(django_rq.settings.QUEUES, "evolution", {"URL": dead})
    user, workspace, _ = demo
    config_file(gives_up_config())
    task = make_task(user, workspace, goal=GOAL, mode="plan_exec")
    with caplog.at_level(logging.WARNING, logger="apps.evolution"):
        assert run(task) == "gave_up_after_reflections"
    task.refresh_from_db()
    assert task.status == "gave_up_after_reflections" and task.finished_at
    assert task.events.order_by("-seq").first().type == "task_finished"
    assert counter("redis_unavailable") == 1
    assert "Redis unavailable" in caplog.text


def test_an_unexpected_scheduling_error_is_logged_counted_and_the_task_still_ends(
    demo, config_file, evolution_queue, caplog
):
    from django.db import connection

    user, workspace, _ = demo
    config_file(gives_up_config())
    task = make_task(user, workspace, goal=GOAL, mode="plan_exec")
    with connection.cursor() as cursor:  # the evolution store breaks mid-run
        cursor.execute("ALTER TABLE evolution_pitfallinjection RENAME TO injections_away")
    try:
        with caplog.at_level(logging.WARNING, logger="apps.evolution"):
            assert run(task) == "gave_up_after_reflections"
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE injections_away RENAME TO evolution_pitfallinjection")
    task.refresh_from_db()
    assert task.status == "gave_up_after_reflections"
    assert task.events.order_by("-seq").first().type == "task_finished"
    assert "scheduling for task" in caplog.text and counter("schedule_error") == 1
    assert evolution_queue.count == 0
