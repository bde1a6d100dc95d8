"""Runs a checked suite: at most `concurrency` tasks at a time, each through the chat's runner
(`apps.tasks.run.runner.run_task`) in this process (executor inline) or on RQ workers (executor rq,
job `task-<id>` on the agent queue, awaited by polling its Task row).

Ctrl-C: no further task starts, every running one is asked to cancel (the runner ends it
`cancelled`), and the run returns once they have ended, so the report still gets written. A
second Ctrl-C stops waiting; the tasks still unfinished are then marked cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.db import connection, connections

from apps.specs.stage import SPEC_MODES
from apps.tasks.batch.outcomes import Outcome, outcome_of
from apps.tasks.batch.review import auto_confirm
from apps.tasks.batch.services import batch_label, batch_tasks_create, batch_workspace_copy
from apps.tasks.batch.spec import Suite, TaskSpec
from apps.tasks.dispatch.job_ids import current_job_id
from apps.tasks.events.ending import publish_blocking, task_end_now
from apps.tasks.events.event_writer import event_writer
from apps.tasks.models import FINAL_STATUSES, Task, TaskStatus
from apps.tasks.run.db_threads import install as install_db_threads
from apps.tasks.run.executors import SERVING_SWITCH_INTERVAL_SECONDS
from apps.tasks.run.reaper import reaper_start
from apps.tasks.run.runner import run_task
from apps.tasks.services import ApplicationError, task_request_cancel

EXECUTORS = ("inline", "rq")
TICK_SECONDS = 0.5
PRESTART_TIMEOUT = 10  # seconds the pre-started threads wait for each other at most
MAX_THREADS = 64  # SQLite serializes writers anyway; PostgreSQL's connections are finite


class Progress(Protocol):
    def task_started(self, spec: TaskSpec, task_id: int) -> None: ...
    def task_finished(self, outcome: Outcome) -> None: ...
    def interrupted(self, running: int) -> None: ...
    def tick(self) -> None: ...


@dataclass(frozen=True)
class BatchOptions:
    workspaces_dir: Path
    concurrency: int = 4
    executor: str = "inline"
    queue: str = "agent"
    poll_seconds: float = 0.2
    review: str = "auto"  # spec reviews: auto (the batch confirms) | wait (a person does)
    # A suite's scorer (suites.py): after a task ends, `await score(spec, workspace)` → fields
    # of its Outcome (hidden_tests, solved, ...).
    score: Callable[[TaskSpec, Path], Awaitable[dict]] | None = None
    # run_tasks --workspace: every task in this existing workspace instead of a fresh copy each
    # (a repository workspace: each task on its own branch, in parallel; docs/repositories.md).
    workspace: Any = None


@dataclass
class BatchRun:
    suite: Suite
    label: str
    options: BatchOptions
    started_at: datetime
    outcomes: list[Outcome] = field(default_factory=list)  # in file order
    finished_at: datetime | None = None
    wall_seconds: float = 0.0
    interrupted: bool = False
    aborted: bool = False  # a second Ctrl-C: stopped waiting for the cancelled tasks


@dataclass
class _State:
    stopping: bool = False
    task_ids: dict[str, int] = field(default_factory=dict)  # spec id -> Task pk, once created
    running: set[int] = field(default_factory=set)
    reviewing: set[int] = field(default_factory=set)  # running, in a mode with a spec review


def warm_up(config) -> None:
    """The process's one-time start-up before the clock starts (both are cached for the
    process): probing the sandbox backends, the TLS context of the model clients, importing
    the HTTP stack the clients load on their first request and the tools (read_file loads its
    grammars), so the report's wall time is the tasks' own."""
    import importlib

    from apps.engine.llm.gateway import tls_context
    from apps.engine.sandbox import Sandbox
    from apps.tools.builtin.registry import available_tool_names, tool_class
    from apps.tools.builtin.symbols import supported_languages_phrase

    # The batch's loop shares the GIL with the writer and database threads as the serving
    # loop does: the same switch interval as the chat (executors.warm_up).
    sys.setswitchinterval(SERVING_SWITCH_INTERVAL_SECONDS)
    Sandbox.from_config(config.sandbox)
    tls_context()
    for name in available_tool_names():
        tool_class(name)
    supported_languages_phrase()
    for module in ("httpcore", "anyio.streams.tls"):
        importlib.import_module(module)


async def run_batch(
    suite: Suite, *, user, config, options: BatchOptions, progress: Progress
) -> BatchRun:
    run = BatchRun(suite, batch_label(), options, started_at=datetime.now(UTC))
    state = _State()
    slots = asyncio.Semaphore(options.concurrency)
    loop = asyncio.get_running_loop()
    # Each running task keeps a few calls in threads at once (event rows, its cancel watcher);
    # the default pool (CPUs + 4 threads) would make tasks queue behind each other's writes.
    threads = min(4 * options.concurrency + 4, MAX_THREADS)
    install_db_threads(loop, max_workers=threads)  # connections recycled (db_threads.py)
    creator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batch-create")
    reaper_start()  # tasks of other processes that died are ended or resumed here too
    await _prestart(creator, workers=min(threads, options.concurrency + 2))
    started = time.monotonic()

    def on_interrupt() -> None:
        if state.stopping:  # the second Ctrl-C: stop waiting
            run.aborted = True
            everything.cancel()
            return
        state.stopping = run.interrupted = True
        progress.interrupted(len(state.running))
        cancelling.append(loop.create_task(_cancel_all(state, options)))

    creations = _Creations(
        creator, user=user, label=run.label, config=config, workspace=options.workspace
    )
    cancelling: list[asyncio.Task] = []
    handled = _add_sigint(loop, on_interrupt)
    ticker = loop.create_task(_tick(progress))
    reviewer = (
        loop.create_task(auto_confirm(user=user, running=state.reviewing))
        if options.review == "auto"
        else None
    )

    async def one(spec: TaskSpec) -> Outcome:
        async with slots:
            if state.stopping:
                return await sync_to_async(outcome_of)(spec=spec, task_id=None)
            # Copies in parallel; rows one at a time on their own thread (SQLite writers would
            # only wait on each other, and Django's shared sync thread serves the runs' reads).
            if options.workspace is not None:
                root = Path(options.workspace.root_dir)
            else:
                root = await sync_to_async(batch_workspace_copy, thread_sensitive=False)(
                    spec=spec, label=run.label, workspaces_dir=options.workspaces_dir
                )
            task = await creations.create(spec, root)
            state.task_ids[spec.id] = task.pk
            state.running.add(task.pk)
            if task.mode in SPEC_MODES:  # only these ask for a spec review
                state.reviewing.add(task.pk)
            progress.task_started(spec, task.pk)
            try:
                if state.stopping:  # Ctrl-C while the workspace was being copied
                    await sync_to_async(task_request_cancel)(task=task)
                if options.executor == "rq":
                    await _run_on_rq(task.pk, options, state)
                else:
                    await run_task(task.pk)
            finally:
                state.running.discard(task.pk)
                state.reviewing.discard(task.pk)
            outcome = await sync_to_async(outcome_of, thread_sensitive=False)(
                spec=spec, task_id=task.pk
            )
            if options.score is not None:
                outcome = replace(outcome, **await options.score(spec, root))
            progress.task_finished(outcome)
            return outcome

    everything = asyncio.gather(*(one(spec) for spec in suite.tasks))
    try:
        run.outcomes = list(await everything)
    except asyncio.CancelledError:
        if not run.aborted:
            raise
        await sync_to_async(abandon)(list(state.running), reason="a second Ctrl-C")
        run.outcomes = [
            await sync_to_async(outcome_of)(spec=spec, task_id=state.task_ids.get(spec.id))
            for spec in suite.tasks
        ]
    finally:
        for helper in filter(None, (ticker, reviewer)):
            helper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await helper
        creator.submit(connections.close_all)  # the creating thread's database connection
        creator.shutdown(wait=False)
        if handled:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signal.SIGINT)
        run.finished_at = datetime.now(UTC)
        run.wall_seconds = round(time.monotonic() - started, 3)
    return run


class _Creations:
    """Creates the tasks' rows on the batch's creating thread. The tasks whose copies are ready
    while it works are created together, in one transaction (batch_tasks_create): the tasks
    that start at once (up to --concurrency of them) make one or two commits rather than one
    each, and their creation does not take the database's write lock turn about with the first
    event writes of the tasks already running (a writer that finds the lock taken sleeps)."""

    def __init__(
        self, executor: ThreadPoolExecutor, *, user, label: str, config, workspace=None
    ) -> None:
        self._executor = executor
        self._create = partial(
            batch_tasks_create, user=user, label=label, config=config, workspace=workspace
        )
        self._pending: list[tuple[TaskSpec, Path, asyncio.Future]] = []
        self._drainer: asyncio.Task | None = None

    async def create(self, spec: TaskSpec, root: Path) -> Task:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((spec, root, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0)  # the copies finishing in this turn of the loop join the batch
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                created = await loop.run_in_executor(
                    self._executor, self._create, [(spec, root) for spec, root, _ in batch]
                )
            except Exception as exc:  # the transaction itself failed: every task of it
                created = [exc] * len(batch)
            for (_, _, future), result in zip(batch, created, strict=True):
                if future.done():  # its run was cancelled meanwhile
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)


async def _prestart(creator: ThreadPoolExecutor, *, workers: int) -> None:
    """Start the threads the tasks' blocking calls will use, each with its database connection
    open, before the first task: the pool would otherwise start a thread and the thread open a
    connection in the middle of a task's first calls (a connection costs about a millisecond of
    CPU, taken from the tasks running beside it). Also the creating thread and the shared
    thread of thread-sensitive calls, with their connections, and this process's event writer
    (its connection opens at its first write)."""
    loop = asyncio.get_running_loop()
    barrier = threading.Barrier(workers)

    def connect(wait: bool) -> None:
        try:
            connection.ensure_connection()  # a database that fails here fails the run
        finally:
            if wait:  # hold the thread until all have started: each call gets a thread
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(timeout=PRESTART_TIMEOUT)

    event_writer()
    await asyncio.gather(
        *(loop.run_in_executor(None, connect, True) for _ in range(workers)),
        loop.run_in_executor(creator, connect, False),
        sync_to_async(connect)(False),
    )


def _add_sigint(loop: asyncio.AbstractEventLoop, callback) -> bool:
    try:
        loop.add_signal_handler(signal.SIGINT, callback)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
        return False
    return True


async def _tick(progress: Progress) -> None:
    while True:
        progress.tick()
        await asyncio.sleep(TICK_SECONDS)


async def _cancel_all(state: _State, options: BatchOptions) -> None:
    for task_id in list(state.running):
        task = await sync_to_async(Task.objects.get)(pk=task_id)
        await sync_to_async(task_request_cancel)(task=task)
        if options.executor == "rq":
            await sync_to_async(_drop_unstarted_job)(task_id, options.queue)


# ── executor rq ────────────────────────────────────────────────────────────────────────────────
def _enqueue(task_id: int, queue: str) -> None:
    from apps.tasks.dispatch.rq_submit import task_enqueue_rq

    task_enqueue_rq(task_id=task_id, queue=queue)


def _job_status(task_id: int, queue: str) -> str | None:
    import django_rq
    from rq.exceptions import NoSuchJobError
    from rq.job import Job

    try:
        redis = django_rq.get_connection(queue)
        job_id = current_job_id(redis, task_id)
        if job_id is None:
            return None
        job = Job.fetch(job_id, connection=redis)
    except NoSuchJobError:
        return None
    return job.get_status(refresh=True)


def _drop_unstarted_job(task_id: int, queue: str) -> None:
    """A job no worker has taken yet is cancelled in RQ and its task ends cancelled here."""
    import django_rq
    from rq.job import Job

    with contextlib.suppress(Exception):
        redis = django_rq.get_connection(queue)
        job = Job.fetch(current_job_id(redis, task_id) or "", connection=redis)
        if job.get_status(refresh=True) == "queued":
            job.cancel()
            abandon([task_id], reason="cancelled before a worker took it")


async def _run_on_rq(task_id: int, options: BatchOptions, state: _State) -> None:
    await sync_to_async(_enqueue)(task_id, options.queue)
    polls = 0
    while True:
        status = await sync_to_async(_task_status)(task_id)
        if status in FINAL_STATUSES or status in (TaskStatus.PARKED, "missing"):
            return
        polls += 1
        if polls % 10 == 0:  # a job that died without ending its task (worker killed)
            job = await sync_to_async(_job_status)(task_id, options.queue)
            if job in ("failed", "stopped", "canceled"):
                await sync_to_async(abandon)(
                    [task_id], reason=f"its RQ job {job}; the worker log has the details"
                )
                return
        await asyncio.sleep(options.poll_seconds)


def _task_status(task_id: int) -> str:
    return Task.objects.filter(pk=task_id).values_list("status", flat=True).first() or "missing"


def abandon(task_ids: list[int], *, reason: str) -> int:
    """End tasks the batch stopped waiting for as cancelled (nothing runs them any more), each
    with its `error` and `task_finished` events (ending.py), told to its sockets."""
    error = {
        "error_code": "cancelled",
        "message": f"the batch run stopped this task: {reason}",
        "suggestions": ["Run the batch again."],
        "retryable": True,
    }
    ended = 0
    for task_id in task_ids:
        messages = task_end_now(task_id, TaskStatus.CANCELLED, error)
        if messages:
            ended += 1
            publish_blocking(task_id, messages)
    return ended


def check_executor(executor: str) -> None:
    """Refuse an executor that cannot work here, before anything is created."""
    from django.conf import settings

    if executor not in EXECUTORS:
        raise ApplicationError(f"unknown executor {executor!r}; choose inline or rq")
    if executor == "rq" and not settings.REDIS_URL:
        raise ApplicationError(
            "--executor rq needs REDIS_URL (this command and the workers must share a Redis): "
            "set it, start workers with 'python manage.py rqworker agent', or use --executor inline"
        )
