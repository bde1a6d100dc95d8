"""RQ jobs: fetch by id, call one function."""

from __future__ import annotations

import asyncio


def run_task_job(task_id: int) -> str:
    from apps.tasks.runner import run_task

    return asyncio.run(run_task(task_id))
