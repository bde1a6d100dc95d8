"""Counters of what evolution scheduling did (visible in admin): one row per name."""

from __future__ import annotations

import logging

from django.db.models import F

from apps.evolution.models import EvolutionCounter

log = logging.getLogger(__name__)


def counter_increment(name: str, by: int = 1) -> None:
    try:
        updated = EvolutionCounter.objects.filter(name=name).update(value=F("value") + by)
        if not updated:
            counter, _ = EvolutionCounter.objects.get_or_create(name=name)
            EvolutionCounter.objects.filter(pk=counter.pk).update(value=F("value") + by)
    except Exception:  # counting must never break a task's end
        log.warning("evolution counter %s could not be updated", name, exc_info=True)


def counter_values() -> dict[str, int]:
    return dict(EvolutionCounter.objects.values_list("name", "value"))
