"""Reads of evolution data for people: the dashboard's figures, scoped to some workspaces."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate

from apps.evolution.models import EvolutionCounter, Pitfall, PitfallInjection

TOP = 10


@dataclass(frozen=True)
class Dashboard:
    by_day: list[dict] = field(default_factory=list)  # {day, created, active}
    top_pitfalls: list[Pitfall] = field(default_factory=list)  # by occurrences
    most_injected: list[dict] = field(default_factory=list)  # pitfall, hits, completed, failed
    counters: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)


def evolution_dashboard(*, workspaces: QuerySet, days: int = 30) -> Dashboard:
    pitfalls = Pitfall.objects.filter(workspace__in=workspaces)
    by_day = list(
        pitfalls.annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(created=Count("id"), active=Count("id", filter=Q(status="active")))
        .order_by("-day")[:days]
    )
    injected = (
        PitfallInjection.objects.filter(pitfall__in=pitfalls)
        .values("pitfall_id", "pitfall__trigger", "pitfall__workspace__name")
        .annotate(
            hits=Count("id"),
            completed=Count("id", filter=Q(outcome="completed")),
            failed=Count("id", filter=Q(outcome__in=["failed", "gave_up_after_reflections"])),
            running=Count("id", filter=Q(outcome="")),
        )
        .order_by("-hits", "pitfall_id")[:TOP]
    )
    totals = {
        status: pitfalls.filter(status=status).count()
        for status in ("candidate", "active", "retired")
    }
    return Dashboard(
        by_day=by_day,
        top_pitfalls=list(
            pitfalls.select_related("workspace").order_by("-occurrences", "-confidence", "id")[:TOP]
        ),
        most_injected=list(injected),
        counters=dict(EvolutionCounter.objects.values_list("name", "value")),
        totals=totals,
    )
