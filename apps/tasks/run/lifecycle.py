"""The end of a run, on the database side: the engine's lifecycle hooks (exactly one fires per
run) set the final status over what the task_finished row wrote, end the executed spec and
schedule learning from the outcome (evolution). Used by runner.py."""

from __future__ import annotations

import asyncio
import functools

from django.db.models import Q
from django.utils import timezone

from apps.engine.ports import TaskHooks
from apps.engine.task import TaskResult
from apps.evolution.services import evolution_schedule
from apps.specs.services import spec_finish_for_task
from apps.tasks import selectors
from apps.tasks.events.recorder import EventRecorder
from apps.tasks.models import FINAL_STATUSES, Task


def finish_task(
    task_id: int, result: TaskResult, scrubbed: dict | None = None, written: str | None = None
) -> None:
    # Failure handling: the salvage and the failure's own text (scrubbed) when there are some.
    extra = {k: v for k, v in (scrubbed or {}).items() if v}
    # `written`: the status the committed task_finished row set, with the same answer, usage and
    # cost (event_writer.py). That row said it all unless there is more to add: no second UPDATE
    # (with 50 tasks ending together, 50 more write transactions queued against the streams').
    if written != result.status or extra:
        _finish_update(task_id, result, extra)
    spec_finish_for_task(task_id=task_id, completed=result.ok)  # the executed spec: done/failed


def _finish_update(task_id: int, result: TaskResult, extra: dict) -> None:
    # Not final yet, or final as this result: its task_finished row set it (event_writer.py).
    unfinished = ~Q(status__in=FINAL_STATUSES) | Q(status=result.status)
    Task.objects.filter(unfinished, pk=task_id).update(
        **extra,
        status=result.status,
        result=result.final,
        error=result.error.model_dump(mode="json") if result.error else None,
        usage=result.usage.model_dump(mode="json"),
        cost=result.cost,
        finished_at=timezone.now(),
    )


class RunnerHooks(TaskHooks):
    """The engine's lifecycle hooks set the final status (exactly one fires per run; a plan_exec
    run that gave up after its reflections fires on_task_failed with that status)."""

    def __init__(
        self,
        task_id: int,
        paths: list[str] | None = None,
        secrets: list[str] = (),
        *,
        mode: str | None = None,
        recorder: EventRecorder | None = None,
    ):
        self.task_id, self.mode, self.recorder = task_id, mode, recorder
        self.paths, self.secrets = paths or [], list(secrets)

    async def _learn(self, result: TaskResult, scrubbed: dict | None = None) -> None:
        written = self.recorder.final_written if self.recorder is not None else None
        stored = await run_to_completion(
            _finish_and_learn, self.task_id, result, scrubbed, written=written, mode=self.mode
        )
        if self.recorder is not None:
            self.recorder.stored_status = stored  # run_task returns it: no trip of its own

    async def on_task_complete(self, result: TaskResult) -> None:
        await self._learn(result)

    async def on_task_failed(self, result: TaskResult) -> None:
        await self._learn(result, self._failure_fields(result))

    def _failure_fields(self, result: TaskResult) -> dict:
        from apps.engine.failure.fallback import scrub

        original = result.original_error or ""
        return {
            "salvage": result.salvage,
            "original_error": scrub(original, paths=self.paths, secrets=self.secrets),
        }

    async def on_task_cancelled(self, result: TaskResult) -> None:
        await self._learn(result)

    async def on_task_parked(self, result: TaskResult) -> None:
        # Spec review timed out: the spec and task wait, parked; nothing to learn from yet.
        await run_to_completion(finish_task, self.task_id, result)


async def run_to_completion(func, *args, **kwargs):
    """`func` on the loop's default executor, run to its end even if the awaiting run is
    cancelled meanwhile (a second cancel while the engine's `finally` fires the hook, the
    serving loop shutting down): the final status and the evolution job are not lost with
    it. The executor's job is shielded; sync_to_async would cancel it while it still waits
    for a thread."""
    loop = asyncio.get_running_loop()
    return await asyncio.shield(
        loop.run_in_executor(None, functools.partial(func, *args, **kwargs))
    )


def _finish_and_learn(
    task_id: int,
    result: TaskResult,
    scrubbed: dict | None = None,
    *,
    written: str | None = None,
    mode: str | None = None,
) -> str | None:
    """The end of a run on one worker thread; returns the status the task now has stored."""
    finish_task(task_id, result, scrubbed, written)
    evolution_schedule(task_id=task_id, outcome=result.status, mode=mode)  # never raises
    return selectors.task_status(task_id=task_id)
