"""RQ jobs of queue `evolution`: fetch by id, call one service."""

from __future__ import annotations

from dataclasses import asdict


def evolve_task_job(task_id: int) -> dict:
    from apps.evolution.services import evolve_task
    from apps.tasks.conf import agent_config

    config = agent_config()
    return asdict(evolve_task(task_id=task_id, config=config.evolution, agent_config=config))
