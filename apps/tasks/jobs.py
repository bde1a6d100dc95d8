"""RQ jobs: fetch by id, call one function."""

from __future__ import annotations

import asyncio


def run_task_job(task_id: int) -> str:
    return asyncio.run(_run(task_id))


async def _run(task_id: int) -> str:
    from apps.tasks.db_threads import install
    from apps.tasks.reaper import reaper_start
    from apps.tasks.runner import run_task

    install()  # the job's threads recycle their database connections (db_threads.py)
    reaper_start()  # a worker running tasks reaps too (reaper.py)
    return await run_task(task_id)
