"""The dashboard's series: reads over the tasks of the workspaces a user belongs to.

Each figure is aggregated in the database and bounded (a period of days, or the last N tasks),
so the page costs a few queries however many tasks there are (bench/dashboard.py: 10,000
tasks). Days are the tasks' creation days in the server's time zone; every day of the period is
present (a quiet day is a 0, not a missing bar).

A task's day is found by comparing its `created_at` with the period's midnights (a CASE in SQL)
rather than with TruncDate, which SQLite evaluates by calling back into Python for every row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

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
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from apps.evolution.models import PitfallInjection
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
INJECTION_OUTCOMES = ("completed", "failed", "other")


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
    pitfalls: dict[str, list[int]]  # INJECTION_OUTCOMES -> injections per day
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


def _midnight(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def _in_period(field_name: str, days: list[date]) -> Q:
    return Q(**{f"{field_name}__gte": _midnight(days[0])}) & Q(
        **{f"{field_name}__lt": _midnight(days[-1] + timedelta(days=1))}
    )


def _day_index(field_name: str, days: list[date], first: int = 0) -> Case | Value:
    """The index in `days` of the day `field_name` falls on (rows already in the period): a
    binary search over the midnights, so a row costs a handful of comparisons."""
    if len(days) == 1:
        return Value(first)
    middle = len(days) // 2
    return Case(
        When(
            **{f"{field_name}__lt": _midnight(days[middle])},
            then=_day_index(field_name, days[:middle], first),
        ),
        default=_day_index(field_name, days[middle:], first + middle),
        output_field=IntegerField(),
    )


def _per_day(rows: Iterable[dict], days: list[date], keys: Iterable[str], column: str):
    series = {key: [0] * len(days) for key in keys}
    for row in rows:
        if row[column] in series:
            series[row[column]][row["day"]] += row["n"]
    return series


def _has_event(kind: str, **data) -> Exists:
    lookups = {f"data__{key}": value for key, value in data.items()}
    return Exists(TaskEvent.objects.filter(task=OuterRef("pk"), type=kind, **lookups))


# How a task's verification went, from its verification_result and reflection events (looked up
# through the (task, type) index): "" when it never ran verification.
VERIFICATION = Case(
    When(~_has_event("verification_result"), then=Value("")),
    When(_has_event("verification_result", passed=True, attempt=1), then=Value("first_try")),
    When(
        Q(_has_event("verification_result", passed=True)) & Q(_has_event("reflection")),
        then=Value("after_reflection"),
    ),
    When(_has_event("verification_result", passed=True), then=Value("after_reinjection")),
    default=Value("failed"),
    output_field=CharField(),
)


def _usage_sum(key: str) -> Coalesce:
    return Coalesce(Sum(Cast(KT(f"usage__{key}"), IntegerField())), 0)


def daily_task_figures(*, tasks: QuerySet[Task], days: list[date]) -> dict:
    """One pass over the period's tasks, grouped by day, status and verification outcome:
    {"outcomes": status -> tasks per day, "cache_hit_rate": per day (cached prompt tokens over
    all prompt tokens; None without any), "verification": VERIFICATION_OUTCOMES -> finished
    verified tasks per day (first try, after re-injection, after reflection, never passed)}."""
    rows = list(
        tasks.filter(_in_period("created_at", days))
        .annotate(day=_day_index("created_at", days), verification=VERIFICATION)
        .values("day", "status", "verification")
        .annotate(
            n=Count("id"),
            prompt=_usage_sum("input_tokens"),
            cached=_usage_sum("cache_read_tokens"),
        )
        .order_by()
    )
    prompt, cached = [0] * len(days), [0] * len(days)
    for row in rows:
        prompt[row["day"]] += row["prompt"]
        cached[row["day"]] += row["cached"]
    finished = [row for row in rows if row["status"] in FINAL_STATUSES]
    return {
        "outcomes": _per_day(rows, days, OUTCOMES, "status"),
        "cache_hit_rate": [
            min(1.0, c / p) if p > 0 else None for c, p in zip(cached, prompt, strict=True)
        ],
        "verification": _per_day(finished, days, VERIFICATION_OUTCOMES, "verification"),
    }


def injections_by_day(*, tasks: QuerySet[Task], days: list[date]) -> dict[str, list[int]]:
    """Pitfalls injected into the prompts of `tasks` (apps.evolution records each injection and
    the task's final status), per task day, by how the task ended: completed, failed (or gave
    up), other (still running, cancelled)."""
    rows = (
        PitfallInjection.objects.filter(Q(task__in=tasks) & _in_period("task__created_at", days))
        .annotate(
            day=_day_index("task__created_at", days),
            outcome_class=Case(
                When(outcome="completed", then=Value("completed")),
                When(outcome__in=["failed", "gave_up_after_reflections"], then=Value("failed")),
                default=Value("other"),
                output_field=CharField(),
            ),
        )
        .values("day", "outcome_class")
        .annotate(n=Count("id"))
        .order_by()
    )
    return _per_day(rows, days, INJECTION_OUTCOMES, "outcome_class")


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


def dashboard_data(*, tasks: QuerySet[Task], days: int, today: date | None = None) -> DashboardData:
    period = period_days(days, today)
    daily = daily_task_figures(tasks=tasks, days=period)
    outcomes, verification = daily["outcomes"], daily["verification"]
    verified = sum(sum(v) for v in verification.values())
    passed = verified - sum(verification["failed"])
    return DashboardData(
        days=period,
        outcomes=outcomes,
        recent=recent_usage(tasks=tasks),
        cache_hit_rate=daily["cache_hit_rate"],
        verification=verification,
        pitfalls=injections_by_day(tasks=tasks, days=period),
        totals={
            "tasks": sum(sum(v) for v in outcomes.values()),
            "completed": sum(outcomes["completed"]),
            "verified": verified,
            "verification_pass_rate": passed / verified if verified else None,
        },
    )
