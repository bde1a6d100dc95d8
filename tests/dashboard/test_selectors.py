"""The dashboard's series, computed in SQLite from real rows: statuses per day, usage with cache
reads, verification outcomes from verification_result/reflection events, pitfall injections."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from apps.dashboard.selectors import (
    dashboard_data,
    dashboard_tasks,
    period_days,
)
from apps.evolution.models import Pitfall, PitfallInjection
from apps.tasks.models import Task, TaskEvent
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db

TODAY = date(2026, 11, 23)


def on_day(task: Task, day: date) -> Task:
    when = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    Task.objects.filter(pk=task.pk).update(created_at=when)
    return task


def events(task: Task, *items: tuple[str, dict]) -> None:
    for seq, (kind, data) in enumerate(items, 1):
        TaskEvent.objects.create(task=task, seq=seq, type=kind, data=data, ts=timezone.now())


def verification(attempt: int, passed: bool) -> tuple[str, dict]:
    return (
        "verification_result",
        {"attempt": attempt, "passed": passed, "errors": [], "log": "", "reinjected": False},
    )


REFLECTION = ("reflection", {"step": 5, "attempt": 1, "ok": True, "text": "do better"})


@pytest.fixture
def alice(tmp_path):
    user = make_user("alice")
    return user, make_workspace("alpha", tmp_path, user)


def test_outcomes_count_tasks_per_day_by_status_within_the_period(alice):
    user, ws = alice
    for status, day in [
        ("completed", TODAY),
        ("completed", TODAY),
        ("failed", TODAY),
        ("gave_up_after_reflections", TODAY - timedelta(days=2)),
        ("running", TODAY - timedelta(days=2)),
        ("completed", TODAY - timedelta(days=7)),  # outside a 7-day period
    ]:
        on_day(make_task(user, ws, status=status), day)

    data = dashboard_data(tasks=dashboard_tasks(user=user), days=7, today=TODAY)

    assert data.days == period_days(7, TODAY) and data.days[-1] == TODAY and len(data.days) == 7
    assert data.outcomes["completed"] == [0, 0, 0, 0, 0, 0, 2]
    assert data.outcomes["failed"] == [0, 0, 0, 0, 0, 0, 1]
    assert data.outcomes["gave_up_after_reflections"] == [0, 0, 0, 0, 1, 0, 0]
    assert data.outcomes["running"] == [0, 0, 0, 0, 1, 0, 0]
    assert data.totals["tasks"] == 5 and data.totals["completed"] == 2


def test_recent_usage_lists_the_last_tasks_oldest_first_with_cached_tokens(alice):
    user, ws = alice
    first = make_task(
        user,
        ws,
        goal="first",
        usage={"input_tokens": 1000, "cache_read_tokens": 800, "output_tokens": 50},
        cost=0.0123,
    )
    second = make_task(user, ws, goal="second", usage={}, cost=0.0)
    third = make_task(user, ws, goal="third", usage={"input_tokens": 10, "output_tokens": "x"})

    data = dashboard_data(tasks=dashboard_tasks(user=user), days=30)

    assert [t.id for t in data.recent] == [first.pk, second.pk, third.pk]
    usage = data.recent[0]
    assert (usage.input_tokens, usage.cache_read_tokens, usage.uncached_input_tokens) == (
        1000,
        800,
        200,
    )
    assert usage.output_tokens == 50 and usage.cost == pytest.approx(0.0123)
    assert data.recent[1].input_tokens == 0
    assert data.recent[2].output_tokens == 0  # not a number: counted as none


def test_recent_usage_is_bounded(alice):
    user, ws = alice
    Task.objects.bulk_create(
        [Task(user=user, workspace=ws, mode="react", goal=f"g{i}") for i in range(60)]
    )
    data = dashboard_data(tasks=dashboard_tasks(user=user), days=7)
    assert len(data.recent) == 50


def test_cache_hit_rate_is_cached_over_all_prompt_tokens_per_day(alice):
    user, ws = alice
    usage = [
        ({"input_tokens": 1000, "cache_read_tokens": 900}, TODAY),
        ({"input_tokens": 3000, "cache_read_tokens": 100}, TODAY),
        ({"input_tokens": 200}, TODAY - timedelta(days=1)),
        ({}, TODAY - timedelta(days=2)),  # a task without usage: no rate that day
    ]
    for values, day in usage:
        on_day(make_task(user, ws, usage=values), day)

    data = dashboard_data(tasks=dashboard_tasks(user=user), days=4, today=TODAY)

    assert data.cache_hit_rate == [None, None, 0.0, pytest.approx(1000 / 4000)]


def test_verification_outcomes_tell_first_try_reinjection_reflection_and_failure_apart(alice):
    user, ws = alice

    def task(status, *items, day=TODAY):
        created = on_day(make_task(user, ws, mode="plan_exec", status=status), day)
        events(created, ("task_started", {}), *items)
        return created

    task("completed", verification(1, True))
    task("completed", verification(1, True), day=TODAY - timedelta(days=1))
    task("completed", verification(1, False), verification(2, True))
    task("completed", verification(1, False), verification(2, False), REFLECTION,
         verification(3, True))  # fmt: skip
    task("gave_up_after_reflections", verification(1, False), verification(2, False),
         REFLECTION, verification(3, False))  # fmt: skip
    task("failed", verification(1, False), verification(2, False))
    task("completed")  # never verified (react): not counted
    task("running", verification(1, False))  # not finished: not counted yet

    data = dashboard_data(tasks=dashboard_tasks(user=user), days=2, today=TODAY)

    assert data.verification == {
        "first_try": [1, 1],
        "after_reinjection": [0, 1],
        "after_reflection": [0, 1],
        "failed": [0, 2],
    }
    assert data.totals["verified"] == 6
    assert data.totals["verification_pass_rate"] == pytest.approx(4 / 6)


def test_pitfalls_injected_are_counted_per_day_by_how_the_task_ended(alice):
    user, ws = alice
    pitfalls = [
        Pitfall.objects.create(
            workspace=ws, category="loop", trigger=f"t{i}", advice="a", severity="high"
        )
        for i in range(3)
    ]
    done = on_day(make_task(user, ws, status="completed"), TODAY)
    failed = on_day(make_task(user, ws, status="failed"), TODAY - timedelta(days=1))
    running = on_day(make_task(user, ws, status="running"), TODAY)
    for pitfall in pitfalls[:2]:
        PitfallInjection.objects.create(pitfall=pitfall, task=done, outcome="completed")
    PitfallInjection.objects.create(pitfall=pitfalls[2], task=failed, outcome="failed")
    PitfallInjection.objects.create(pitfall=pitfalls[0], task=running, outcome="")

    data = dashboard_data(tasks=dashboard_tasks(user=user), days=2, today=TODAY)

    assert data.pitfalls == {"completed": [0, 2], "failed": [1, 0], "other": [0, 1]}


def test_only_tasks_of_the_users_workspaces_are_counted(alice, tmp_path):
    user, ws = alice
    bob = make_user("bob")
    other = make_workspace("beta", tmp_path, bob)
    make_task(user, ws, status="completed", usage={"input_tokens": 10})
    secret = make_task(bob, other, status="failed", goal="bob's secret", usage={"input_tokens": 5})
    events(secret, verification(1, False))
    PitfallInjection.objects.create(
        pitfall=Pitfall.objects.create(
            workspace=other, category="loop", trigger="t", advice="a", severity="high"
        ),
        task=secret,
        outcome="failed",
    )

    data = dashboard_data(tasks=dashboard_tasks(user=user), days=7)

    assert data.totals["tasks"] == 1 and sum(data.outcomes["failed"]) == 0
    assert [t.goal for t in data.recent] == ["do a thing"]
    assert data.totals["verified"] == 0 and sum(sum(v) for v in data.pitfalls.values()) == 0
    # filtered to one workspace; an anonymous user sees nothing at all
    assert dashboard_tasks(user=user, workspace=other).count() == 0
    assert dashboard_tasks(user=AnonymousUser()).count() == 0


def test_a_task_counts_on_the_day_it_was_created_up_to_midnight(alice):
    user, ws = alice
    late = make_task(user, ws, status="completed")
    early = make_task(user, ws, status="failed")
    before = make_task(user, ws, status="cancelled")
    Task.objects.filter(pk=late.pk).update(
        created_at=datetime(2026, 11, 22, 23, 59, 59, tzinfo=UTC)
    )
    Task.objects.filter(pk=early.pk).update(created_at=datetime(2026, 11, 23, 0, 0, tzinfo=UTC))
    Task.objects.filter(pk=before.pk).update(
        created_at=datetime(2026, 11, 20, 23, 59, 59, tzinfo=UTC)  # the day before the period
    )

    data = dashboard_data(tasks=dashboard_tasks(user=user), days=3, today=TODAY)

    assert data.days == [date(2026, 11, 21), date(2026, 11, 22), TODAY]
    assert data.outcomes["completed"] == [0, 1, 0]
    assert data.outcomes["failed"] == [0, 0, 1]
    assert sum(data.outcomes["cancelled"]) == 0


def test_the_number_of_queries_does_not_grow_with_the_tasks(alice, django_assert_max_num_queries):
    user, ws = alice
    for i in range(30):
        task = on_day(make_task(user, ws, status="completed"), TODAY - timedelta(days=i % 5))
        events(task, verification(1, i % 2 == 0), verification(2, True))
    with django_assert_max_num_queries(3):
        data = dashboard_data(tasks=dashboard_tasks(user=user), days=7, today=TODAY)
    assert data.totals["tasks"] == 30 and data.totals["verified"] == 30
