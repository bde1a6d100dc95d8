"""apps.evolution services: what the rest of agentkit calls.

- `evolution_schedule(task_id=, outcome=)`: at task end (apps/tasks/run/runner.py lifecycle hooks).
- `planning_context(task=, config=)`: at task start, the volatile-block sections ("Pitfalls
  seen before" from `pitfalls_for_task`, and the approved prompt version for the target).
- `evolve_task(task_id=, config=, agent_config=)`: the job itself (RQ, or `manage.py evolve
  --task ID`).
"""

from apps.evolution.services.job import EvolutionReport, evolve_task
from apps.evolution.services.retrieval import SECTION as PITFALLS_SECTION
from apps.evolution.services.retrieval import pitfalls_for_task, planning_context
from apps.evolution.services.scheduling import evolution_schedule

__all__ = [
    "PITFALLS_SECTION",
    "EvolutionReport",
    "evolution_schedule",
    "evolve_task",
    "pitfalls_for_task",
    "planning_context",
]
