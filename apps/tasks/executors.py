"""Where a task runs, chosen by `executor.kind` in agentkit.yaml:

- inline: an asyncio task in the current (Daphne) process — zero setup, the default;
- rq: a job on queue `executor.queue`, run by any `manage.py rqworker` sharing the Redis; events
  reach sockets through the Redis channel layer (REDIS_URL must be set).
"""

from __future__ import annotations

import asyncio
import logging

from django.conf import settings
from django.db import transaction

from apps.tasks.conf import agent_config
from apps.tasks.services import ApplicationError

log = logging.getLogger(__name__)

# Strong references: the event loop keeps only weak ones to tasks.
_inline_tasks: set[asyncio.Task] = set()


def task_submit(*, task_id: int) -> None:
    """Start a queued task on the configured executor once the current transaction commits."""
    config = agent_config()
    if config.executor.kind == "rq":
        if not settings.REDIS_URL:
            raise ApplicationError(
                "executor 'rq' needs REDIS_URL (the workers and the web process must share a Redis); "
                "set it, or use executor.kind: inline",
                {"error_code": "executor_unavailable"},
            )
        transaction.on_commit(lambda: _enqueue_rq(task_id, config.executor.queue))
    else:
        transaction.on_commit(lambda: _start_inline(task_id))


def _enqueue_rq(task_id: int, queue_name: str) -> None:
    import django_rq

    from apps.tasks.jobs import run_task_job

    django_rq.get_queue(queue_name).enqueue(run_task_job, task_id, job_id=f"task-{task_id}")


def _start_inline(task_id: int) -> None:
    from apps.tasks.runner import run_task

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        # Called from a sync context without a loop (e.g. a sync view under WSGI or a command):
        # run in a thread with its own loop so the caller is not blocked.
        import threading

        threading.Thread(
            target=lambda: asyncio.run(run_task(task_id)), daemon=True, name=f"task-{task_id}"
        ).start()
        return
    runner = loop.create_task(run_task(task_id), name=f"task-{task_id}")
    _inline_tasks.add(runner)
    runner.add_done_callback(_inline_tasks.discard)
