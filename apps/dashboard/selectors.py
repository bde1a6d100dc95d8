"""The dashboard's series: reads over the tasks of the workspaces a user belongs to.

Each figure is aggregated in the database and bounded (a period of days, or the last N tasks),
so the page costs a handful of queries however many tasks there are. Days are the tasks'
creation days in the server's time zone; every day of the period is present (a quiet day is a 0,
not a missing bar).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta

from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce, TruncDate
from django.utils import timezone

from apps.evolution.selectors import pitfall_injections_by_day
from apps.tasks.models import FINAL_STATUSES, Task, TaskEvent, TaskStatus
from apps.tasks.selectors import workspaces_for_user

PERIODS = (7, 30, 90)
DEFAULT_PERIOD = 30
RECENT_TASKS = 50

# The final statuses first (stacked bottom-up), then what is still under way.
OUTCOMES = tuple(
    status.value
    for status in (
        TaskStatus.COMPLETED,
        TaskStatus.FAILED,
        TaskStatus.GAVE_UP,
        TaskStatus.CANCELLED,
        TaskStatus.PARKED,
        TaskStatus.AWAITING_REVIEW,
        TaskStatus.RUNNING,
        TaskStatus.QUEUED,
    )
)
VERIFICATION_OUTCOMES = ("first_try", "after_reinjection", "after_reflection", "failed")


@dataclass(frozen=True)
class TaskUsage:
    """One task's tokens and cost (the per-task charts)."""

    id: int
    goal: str
    status: str
    input_tokens: int  # all prompt tokens, cached ones included
    cache_read_tokens: int
    output_tokens: int
    cost: float

    @property
    def uncached_input_tokens(self) -> int:
        return max(0, self.input_tokens - self.cache_read_tokens)


@dataclass(frozen=True)
class DashboardData:
    days: list[date]
    outcomes: dict[str, list[int]]  # status -> tasks per day
    recent: list[TaskUsage]  # oldest first
    cache_hit_rate: list[float | None]  # per day; None: no prompt token that day
    verification: dict[str, list[int]]  # VERIFICATION_OUTCOMES -> finished tasks per day
    pitfalls: dict[str, list[int]]  # completed / failed / other -> injections per day
    totals: dict[str, float | None] = field(default_factory=dict)


def dashboard_tasks(*, user, workspace=None) -> QuerySet[Task]:
    """The tasks a user may see on the dashboard: those of the workspaces they belong to (the
    chat's history shows the same), optionally one of them. Anonymous users see none."""
    workspaces = workspaces_for_user(user=user)
    if workspace is not None:
        workspaces = workspaces.filter(pk=workspace.pk)
    return Task.objects.filter(workspace__in=workspaces)


def period_days(days: int, today: date | None = None) -> list[date]:
    today = today or timezone.localdate()
    return [today - timedelta(days=days - 1 - i) for i in range(days)]


def _per_day(rows: Iterable[dict], days: list[date], keys: Iterable[str], column: str):
    index = {day: i for i, day in enumerate(days)}
    series = {key: [0] * len(days) for key in keys}
    for row in rows:
        i = index.get(row["day"])
        if i is not None and row[column] in series:
            series[row[column]][i] += row["n"]
    return series


def outcomes_by_day(*, tasks: QuerySet[Task], days: list[date]) -> dict[str, list[int]]:
    rows = (
        tasks.filter(created_at__date__gte=days[0])
        .annotate(day=TruncDate("created_at"))
        .values("day", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    return _per_day(rows, days, OUTCOMES, "status")


def _int(usage: dict, key: str) -> int:
    value = (usage or {}).get(key)
    return value if isinstance(value, int) and value > 0 else 0


def recent_usage(*, tasks: QuerySet[Task], limit: int = RECENT_TASKS) -> list[TaskUsage]:
    rows = tasks.order_by("-created_at", "-id").values("id", "goal", "status", "usage", "cost")[
        :limit
    ]
    return [
        TaskUsage(
            id=row["id"],
            goal=row["goal"],
            status=row["status"],
            input_tokens=_int(row["usage"], "input_tokens"),
            cache_read_tokens=_int(row["usage"], "cache_read_tokens"),
            output_tokens=_int(row["usage"], "output_tokens"),
            cost=float(row["cost"] or 0.0),
        )
        for row in reversed(rows)
    ]


def _usage_sum(key: str) -> Coalesce:
    return Coalesce(Sum(Cast(KT(f"usage__{key}"), IntegerField())), 0)


def cache_hit_rate_by_day(*, tasks: QuerySet[Task], days: list[date]) -> list[float | None]:
    """The share of prompt tokens read from the prompt cache, per day (None: no prompt token)."""
    rows = (
        tasks.filter(created_at__date__gte=days[0])
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(prompt=_usage_sum("input_tokens"), cached=_usage_sum("cache_read_tokens"))
        .order_by()
    )
    by_day = {row["day"]: row for row in rows}
    rates: list[float | None] = []
    for day in days:
        row = by_day.get(day)
        rates.append(min(1.0, row["cached"] / row["prompt"]) if row and row["prompt"] > 0 else None)
    return rates


def _has_event(kind: str, **data) -> Exists:
    lookups = {f"data__{key}": value for key, value in data.items()}
    return Exists(TaskEvent.objects.filter(task=OuterRef("pk"), type=kind, **lookups))


def verification_by_day(*, tasks: QuerySet[Task], days: list[date]) -> dict[str, list[int]]:
    """Finished tasks that ran verification, by how they ended: passed at the first attempt,
    passed after the errors were re-injected, passed after a reflection, or never passed."""
    rows = (
        tasks.filter(created_at__date__gte=days[0], status__in=FINAL_STATUSES)
        .filter(_has_event("verification_result"))
        .annotate(
            day=TruncDate("created_at"),
            outcome=Case(
                When(
                    _has_event("verification_result", passed=True, attempt=1),
                    then=Value("first_try"),
                ),
                When(
                    Q(_has_event("verification_result", passed=True)) & Q(_has_event("reflection")),
                    then=Value("after_reflection"),
                ),
                When(
                    _has_event("verification_result", passed=True),
                    then=Value("after_reinjection"),
                ),
                default=Value("failed"),
                output_field=CharField(),
            ),
        )
        .values("day", "outcome")
        .annotate(n=Count("id"))
        .order_by()
    )
    return _per_day(rows, days, VERIFICATION_OUTCOMES, "outcome")


def injections_by_day(*, tasks: QuerySet[Task], days: list[date]) -> dict[str, list[int]]:
    """Pitfalls injected into the prompts of `tasks`, per day, by how the task ended:
    completed, failed (or gave up), other (still running, cancelled)."""
    rows = pitfall_injections_by_day(tasks=tasks, since=days[0])
    return _per_day(rows, days, ("completed", "failed", "other"), "outcome_class")


def dashboard_data(*, tasks: QuerySet[Task], days: int, today: date | None = None) -> DashboardData:
    period = period_days(days, today)
    outcomes = outcomes_by_day(tasks=tasks, days=period)
    recent = recent_usage(tasks=tasks)
    verification = verification_by_day(tasks=tasks, days=period)
    finished_verified = sum(sum(v) for v in verification.values())
    passed = finished_verified - sum(verification["failed"])
    return DashboardData(
        days=period,
        outcomes=outcomes,
        recent=recent,
        cache_hit_rate=cache_hit_rate_by_day(tasks=tasks, days=period),
        verification=verification,
        pitfalls=injections_by_day(tasks=tasks, days=period),
        totals={
            "tasks": sum(sum(v) for v in outcomes.values()),
            "completed": sum(outcomes[TaskStatus.COMPLETED]),
            "verified": finished_verified,
            "verification_pass_rate": passed / finished_verified if finished_verified else None,
        },
    )
