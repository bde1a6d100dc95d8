"""The Prometheus metrics (`prometheus_client`), every name starting with `agentkit_`.

Counters and histograms are recorded where things happen — the runner's event stream and model
calls (observe.py), the reaper, the queue — in whichever process that is: a web process with the
inline executor, an RQ worker with `rq`. With several processes (`make cluster`) each writes its
values to files under PROMETHEUS_MULTIPROC_DIR (prometheus_client's multiprocess mode; the
cluster sets it to var/prometheus and empties it at start) and every web process's `/metrics`
adds them up; a dead worker's totals stay counted. What is true now rather than counted — tasks
queued, running or deferred, the queue's depth — is read from the database and Redis at each
scrape (`StateCollector`), so every web process says the same.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

log = logging.getLogger(__name__)

if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # its files are opened at the first value
    os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)

SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
FAST = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)

TASKS_FINISHED = Counter(
    "agentkit_tasks_finished",
    "Tasks that ended, by mode and final status (parked: waits for a spec review).",
    ["mode", "status"],
)
RUNS = Counter(
    "agentkit_runs",
    "Runs of tasks that ended, by how: finished, deferred (back to the queue behind a busy "
    "workspace or conversation), or other (cancelled while waiting, lost the task).",
    ["mode", "outcome"],
)
RUN_SECONDS = Histogram(
    "agentkit_run_duration_seconds",
    "How long a task's run took, from its start in a worker (or the web process) to its end.",
    ["mode", "status"],
    buckets=SECONDS,
)
QUEUE_WAIT = Histogram(
    "agentkit_queue_wait_seconds",
    "How long a run's RQ job waited in the queue for a free worker.",
    ["queue"],
    buckets=SECONDS,
)
TASK_WAIT = Histogram(
    "agentkit_task_wait_seconds",
    "From a task's creation to the start of its work (queue, workspace and turn waits).",
    ["mode"],
    buckets=SECONDS,
)
MODEL_CALL = Histogram(
    "agentkit_model_call_duration_seconds",
    "Model calls, whole (retries and fallbacks included), by model alias and outcome.",
    ["alias", "outcome"],
    buckets=FAST,
)
MODEL_TTFT = Histogram(
    "agentkit_model_time_to_first_token_seconds",
    "From a streamed model call's start to its first text.",
    ["alias"],
    buckets=FAST,
)
MODEL_TOKENS = Counter(
    "agentkit_model_tokens",
    "Tokens by model alias and kind (input: all prompt tokens, cached ones included).",
    ["alias", "kind"],
)
MODEL_COST = Counter(
    "agentkit_model_cost_dollars",
    "What model calls cost, by alias, at the prices of agentkit.yaml.",
    ["alias"],
)
TOOL_CALLS = Counter("agentkit_tool_calls", "Tool calls by tool and outcome.", ["tool", "outcome"])
TOOL_ERRORS = Counter(
    "agentkit_tool_errors", "Tool calls that failed, by tool and error code.", ["tool", "code"]
)
TOOL_SECONDS = Histogram(
    "agentkit_tool_call_duration_seconds", "Tool calls' durations.", ["tool"], buckets=FAST
)
SANDBOX_KILLS = Counter(
    "agentkit_sandbox_kills",
    "Sandboxed commands killed, by cause: timeout, memory, signal.",
    ["cause"],
)
REAPER_ACTIONS = Counter(
    "agentkit_reaper_actions",
    "What the reaper did to tasks with no live run: restarted, resumed, woken, cancelled, "
    "interrupted.",
    ["action"],
)
VERIFICATIONS = Counter(
    "agentkit_verifications",
    "Verification runs at a final answer, by outcome: passed, failed.",
    ["outcome"],
)


def multiprocess_dir() -> str | None:
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return path if path and os.path.isdir(path) else None


class StateCollector:
    """Gauges read at each scrape: unfinished tasks by mode and status, deferred tasks, and the
    RQ queues' depth and oldest job's age."""

    def collect(self):
        tasks = GaugeMetricFamily(
            "agentkit_tasks",
            "Unfinished tasks by mode and status (queued, running, awaiting_review, parked).",
            labels=["mode", "status"],
        )
        deferred = GaugeMetricFamily(
            "agentkit_tasks_deferred",
            "Queued tasks whose run went back to the queue behind a busy workspace or turn.",
        )
        try:
            for mode, status, count in _task_counts():
                tasks.add_metric([mode, status], count)
            deferred.add_metric([], _deferred_count())
        except Exception:
            log.warning("metrics: the tasks could not be counted", exc_info=True)
        yield tasks
        yield deferred
        depth = GaugeMetricFamily(
            "agentkit_queue_depth", "Jobs waiting in an RQ queue for a worker.", labels=["queue"]
        )
        oldest = GaugeMetricFamily(
            "agentkit_queue_oldest_job_age_seconds",
            "Age of the job at the head of an RQ queue (0 when empty).",
            labels=["queue"],
        )
        for name, count, age in _queues():
            depth.add_metric([name], count)
            oldest.add_metric([name], age)
        yield depth
        yield oldest


def _task_counts() -> list[tuple[str, str, int]]:
    from django.db.models import Count

    from apps.tasks.models import FINAL_STATUSES, Task

    rows = (
        Task.objects.exclude(status__in=FINAL_STATUSES)
        .values_list("mode", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    return [(mode, status, n) for mode, status, n in rows]


def _deferred_count() -> int:
    from apps.tasks.models import Task

    return Task.objects.filter(deferred_behind__isnull=False).count()


def _queues() -> list[tuple[str, int, float]]:
    from django.conf import settings

    if not settings.REDIS_URL:
        return []
    import time

    import django_rq

    found = []
    for name in settings.RQ_QUEUES:
        try:
            queue = django_rq.get_queue(name, connection=_connection(name))
            count = queue.count
            age = 0.0
            head = queue.get_job_ids(0, 0)
            if head:
                job = queue.fetch_job(head[0])
                if job is not None and job.enqueued_at is not None:
                    enqueued = job.enqueued_at
                    if enqueued.tzinfo is None:  # RQ's naive UTC
                        enqueued = enqueued.replace(tzinfo=UTC)
                    age = max(0.0, time.time() - enqueued.timestamp())
            found.append((name, count, age))
        except Exception:
            log.warning("metrics: queue %s could not be read", name, exc_info=True)
    return found


_connections: dict = {}


def _connection(name: str):
    """One Redis client per queue for this process's scrapes (not a new pool per scrape)."""
    import django_rq

    if name not in _connections:
        _connections[name] = django_rq.get_connection(name)
    return _connections[name]
