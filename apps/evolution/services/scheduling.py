"""When a task ends (the runner's lifecycle hooks), decide whether evolution looks at it and
enqueue the job on RQ queue `evolution` (django-rq, after commit).

Failures and gave_up_after_reflections: always. Successes: sampled at
`evolution.success_sample_rate` by a stable hash of the task id. direct_chat and cancelled tasks:
never. Past `evolution.max_pending` waiting jobs the job is dropped; with Redis down it is lost.
Both are logged and counted (EvolutionCounter), and neither ever reaches the task: this function
does not raise."""

from __future__ import annotations

import functools
import hashlib
import logging

import django_rq
from redis import Redis
from redis.exceptions import RedisError

from apps.engine.config import EvolutionConfig
from apps.evolution.models import PitfallInjection
from apps.evolution.services.counters import counter_increment
from apps.evolution.services.prompts import prompt_run_finish
from apps.tasks.conf import agent_config
from apps.tasks.models import Task
from apps.tasks.selectors import task_has_rows

log = logging.getLogger(__name__)

QUEUE = "evolution"
# The job RQ runs, by name: the worker imports it (apps/evolution/jobs.py calls evolve_task of
# this package); importing it here would close a loop jobs → services → scheduling → jobs.
EVOLVE_TASK_JOB = "apps.evolution.jobs.evolve_task_job"
FAILURES = frozenset({"failed", "gave_up_after_reflections"})


def success_sampled(task_id: int, rate: float) -> bool:
    """Stable per task: the first 8 bytes of sha256("evolution:<id>") as a fraction of 2**64."""
    digest = hashlib.sha256(f"evolution:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def evolution_decision(*, task_id: int, mode: str, outcome: str, config: EvolutionConfig) -> str:
    """'schedule', or why not: disabled, direct_chat, not_sampled, not_finished."""
    if not config.enabled:
        return "disabled"
    if mode == "direct_chat":
        return "direct_chat"
    if outcome in FAILURES:
        return "schedule"
    if outcome == "completed":
        return "schedule" if success_sampled(task_id, config.success_sample_rate) else "not_sampled"
    return "not_finished"  # cancelled: the user stopped it, nothing to learn


def queue_settings() -> dict:
    import django_rq.settings

    return django_rq.settings.QUEUES[QUEUE]


@functools.lru_cache(maxsize=4)
def _connection(key: str) -> Redis:
    """One connection pool per process (per queue settings), with short timeouts: a Redis that
    does not answer must not hold up the end of a task."""
    config = queue_settings()
    if "URL" not in config:
        return django_rq.get_connection(QUEUE)
    return Redis.from_url(config["URL"], socket_connect_timeout=1.0, socket_timeout=2.0)


def evolution_schedule(*, task_id: int, outcome: str, mode: str | None = None) -> str:
    """Returns what happened: scheduled, dropped_backpressure, redis_unavailable, schedule_error,
    or the reason it was not scheduled (see evolution_decision). `mode`: the task's, when the
    caller knows it (the runner does), else read."""
    try:
        # An UPDATE takes SQLite's write lock even when it changes nothing: only when there are some.
        if task_has_rows(PitfallInjection, task_id=task_id):
            PitfallInjection.objects.filter(task_id=task_id).update(outcome=outcome)
        try:
            prompt_run_finish(task_id=task_id, outcome=outcome)
        except Exception:  # A/B bookkeeping must not keep the task from being learned from
            log.warning("evolution: prompt run of task %s not recorded", task_id, exc_info=True)
        if mode is None:
            mode = Task.objects.filter(pk=task_id).values_list("mode", flat=True).first()
        config = agent_config().evolution
        decision = evolution_decision(
            task_id=task_id, mode=mode or "", outcome=outcome, config=config
        )
        if decision != "schedule":
            return decision
        queue = django_rq.get_queue(QUEUE, connection=_connection(repr(queue_settings())))
        pending = queue.count
        if pending >= config.max_pending:
            log.warning(
                "evolution: job for task %s dropped, %s jobs already waiting (evolution.max_pending"
                " = %s); start more `rqworker evolution` workers or raise the limit",
                task_id,
                pending,
                config.max_pending,
            )
            counter_increment("dropped_backpressure")
            return "dropped_backpressure"
        queue.enqueue(EVOLVE_TASK_JOB, task_id, job_id=f"evolve-task-{task_id}")
        counter_increment("scheduled")
        return "scheduled"
    except RedisError as exc:
        log.warning(
            "evolution: Redis unavailable, task %s is not learned from (%s); the task itself is "
            "unaffected",
            task_id,
            exc.__class__.__name__,
        )
        counter_increment("redis_unavailable")
        return "redis_unavailable"
    except Exception:
        log.exception("evolution: scheduling for task %s failed; the task is unaffected", task_id)
        counter_increment("schedule_error")
        return "schedule_error"
