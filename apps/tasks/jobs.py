"""RQ jobs: fetch by id, call one function."""

from __future__ import annotations

import asyncio


def run_task_job(task_id: int, reason: str | None = None) -> str:
    """`reason`: why a resumed run resumes (reaper.py's take-over of a dead worker's task)."""
    return asyncio.run(_run(task_id, reason))


async def _run(task_id: int, reason: str | None = None) -> str:
    from apps.tasks.db_threads import install
    from apps.tasks.reaper import reaper_start
    from apps.tasks.runner import run_task

    install()  # the job's threads recycle their database connections (db_threads.py)
    reaper_start()  # a worker running tasks reaps too (reaper.py)
    return await run_task(task_id, resume_reason=reason, defer=True)
