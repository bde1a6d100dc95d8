"""Where a task runs, chosen by `executor.kind` in agentkit.yaml:

- inline: an asyncio task in the current (Daphne) process — zero setup, the default;
- rq: a job on queue `executor.queue`, run by any `manage.py rqworker` sharing the Redis; events
  reach sockets through the Redis channel layer (REDIS_URL must be set).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import sys
import threading

from django.conf import settings
from django.db import transaction

from apps.tasks.conf import agent_config
from apps.tasks.dispatch.queued import QueuedOpening
from apps.tasks.dispatch.rq_submit import rq_queue, task_enqueue_rq, task_enqueue_rq_many  # noqa: F401 (its API)
from apps.tasks.events.local_delivery import local_run_ended, local_run_started
from apps.tasks.services import ApplicationError

log = logging.getLogger(__name__)

SERVING_SWITCH_INTERVAL_SECONDS = 0.001

# Strong references: the event loop keeps only weak ones to tasks.
_inline_tasks: set[asyncio.Task] = set()


def task_submit(*, task_id: int, reason: str | None = None) -> None:
    """Start a queued task on the configured executor once the current transaction commits
    (sockets' new tasks: task_submit_many). `reason`: why a resumed run resumes (the reaper's
    take-over), written into its `task_resumed` event."""
    config = agent_config()
    if config.executor.kind == "rq":
        _submit_rq(config, [task_id], reason)
    else:
        transaction.on_commit(lambda: _start_inline(task_id, reason))


def _submit_rq(config, task_ids: list[int], reason: str | None = None) -> None:
    _require_redis()
    transaction.on_commit(
        lambda: task_enqueue_rq_many(
            task_ids=task_ids,
            queue=config.executor.queue,
            review_wait=_review_wait(config),
            reason=reason,
        )
    )


def _require_redis() -> None:
    if not settings.REDIS_URL:
        raise ApplicationError(
            "executor 'rq' needs REDIS_URL (the workers and the web process must share a Redis); "
            "set it, or use executor.kind: inline",
            {"error_code": "executor_unavailable"},
        )


def _review_wait(config) -> float:
    """What a job may wait for a spec review before its work (added to the queue's limit)."""
    return config.spec_review.timeout_seconds if config.spec_review.enabled else 0


def task_submit_many(*, tasks: list, recorded: bool = False) -> dict[int, list[dict]]:
    """task_submit for tasks that a worker thread of the serving loop created together, outside
    a transaction (apps/tasks/doors/intake.py). Inline: every run is prepared here first (the tasks
    share their workspaces' repository maps), then they start together on the loop: preparing
    the later ones while the first already ran would make them compete with those runs for the
    interpreter, and the last would start much later. rq: their queued events in one
    transaction, their jobs in one Redis round trip (task_enqueue_rq_many).

    Returns the events written here, per task (rq: each new task's `task_waiting`), so that the
    socket that sent the message can send them on without reading them back. `recorded`: the
    tasks were created with theirs (rq_opening), none is written here."""
    config = agent_config()
    if config.executor.kind == "rq":
        if transaction.get_connection().in_atomic_block:  # the jobs wait for the commit
            _submit_rq(config, [task.pk for task in tasks])
            return {}
        _require_redis()
        return task_enqueue_rq_many(
            task_ids=[task.pk for task in tasks],
            queue=config.executor.queue,
            review_wait=_review_wait(config),
            record=not recorded,
        )
    loop = _serving_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is None or running is loop:
        for task in tasks:
            task_submit(task_id=task.pk)
        return {}
    from apps.tasks.run.runner import prepare_run

    built: dict = {}
    prepared = [(task.pk, prepare_run(task.pk, task, built)) for task in tasks]
    loop.call_soon_threadsafe(_spawn_all, prepared, context=contextvars.Context())
    return {}


def _spawn_all(prepared: list) -> None:
    for task_id, run in prepared:
        _spawn(task_id, run)


def warm_up() -> None:
    """At server start (asgi.py). The inline executor runs tasks on the serving loop, so the
    runner's imports (engine, evolution: ~2 s cold), the tool modules (~1 s, imported lazily by
    the registry), the TLS context of the model clients and the sandbox probes (~0.5 s) must
    not happen there at the first task — every socket of the server would wait behind them."""
    # The serving loop shares the GIL with the event writer and the database threads; after
    # each socket read or write it waits for a thread's time slice to end (5 ms by default)
    # before it runs again. 1 ms: bench/streaming.py delivered ~30% more token events a second,
    # with lower latency.
    sys.setswitchinterval(SERVING_SWITCH_INTERVAL_SECONDS)
    if agent_config().executor.kind != "inline":
        return
    from apps.engine.sandbox import Sandbox
    from apps.tasks.run import runner  # noqa: F401
    from apps.tools.builtin.registry import available_tool_names

    available_tool_names()  # imports every tool module
    import httpx

    from apps.engine.llm.gateway import tls_context

    httpx.AsyncClient(verify=tls_context())  # the CA bundle and httpx's transport modules
    # httpcore's pool loads anyio's asyncio backend (~30 modules, 20 ms) at its first request
    # on a loop: without this, the first task's model call does it on the serving loop. anyio's
    # public `run` loads it; in a thread of its own, so no event loop of this thread is touched.
    import anyio

    loader = threading.Thread(target=anyio.run, args=(anyio.sleep, 0), name="agentkit-warm-up")
    loader.start()
    loader.join()

    try:
        Sandbox.shared(agent_config().sandbox)  # the probes; the tasks' shared sandbox
    except Exception:  # no usable sandbox: the task reports it with advice when it runs
        log.info("sandbox probe at start-up failed", exc_info=True)


def rq_opening() -> QueuedOpening | None:
    """With executor rq, for a burst of socket messages about to become tasks: their first
    events, to be written in their creation's transaction (queued.QueuedOpening), with the jobs
    queued now ahead of them. None with another executor, or when the queue cannot be read
    (the submit after the creation then says why)."""
    config = agent_config()
    if config.executor.kind != "rq" or not settings.REDIS_URL:
        return None
    try:
        ahead = rq_queue(config.executor.queue).count
    except Exception:
        log.warning("the queue %r could not be read", config.executor.queue, exc_info=True)
        return None
    return QueuedOpening(queue=config.executor.queue, ahead=ahead)


def _serving_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop serving requests (Daphne's): the running one, or — from a sync view or a
    `sync_to_async` thread — the loop asgiref recorded for that thread. None outside a server."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    from asgiref.sync import SyncToAsync

    local = SyncToAsync.threadlocal
    if getattr(local, "main_event_loop_pid", None) == os.getpid():
        loop = getattr(local, "main_event_loop", None)
        if loop is not None and loop.is_running():
            return loop
    return None


def _spawn(task_id: int, prepared=None, reason: str | None = None) -> None:
    """On the serving loop: run the task as an asyncio task, kept referenced until done."""
    from apps.tasks.run.runner import run_task

    local_run_started(task_id)  # this process's sockets get its events directly
    # A fresh context: the task must not inherit the submitting request's context variables
    # (asgiref's would make it believe it is inside that request's sync_to_async call).
    runner = asyncio.get_running_loop().create_task(
        run_task(task_id, prepared, resume_reason=reason),
        name=f"task-{task_id}",
        context=contextvars.Context(),
    )
    _inline_tasks.add(runner)
    runner.add_done_callback(_inline_tasks.discard)
    runner.add_done_callback(lambda _: local_run_ended(task_id))


def _start_inline(task_id: int, reason: str | None = None) -> None:
    loop = _serving_loop()
    if loop is None:
        # No server loop (a management command, a plain script): a thread with its own loop.
        from apps.tasks.run.runner import run_task

        threading.Thread(
            target=lambda: asyncio.run(run_task(task_id, resume_reason=reason)),
            daemon=True,
            name=f"task-{task_id}",
        ).start()
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        _spawn(task_id, None, reason)
    else:  # a worker thread
        loop.call_soon_threadsafe(_spawn, task_id, None, reason, context=contextvars.Context())
