"""`python manage.py evolve --task ID`: run the evolution job for one task now and print what it
learned (lessons, the pitfalls they joined, a proposed prompt version)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.evolution.services import evolve_task
from apps.tasks.conf import agent_config
from apps.tasks.models import FINAL_STATUSES, Task


class Command(BaseCommand):
    help = "Run the evolution job for a finished task and print what it learned."

    def add_arguments(self, parser):
        parser.add_argument("--task", type=int, required=True, help="id of a finished task")

    def handle(self, *args, task: int, **options):
        row = Task.objects.filter(pk=task).first()
        if row is None:
            raise CommandError(f"task {task} does not exist; `manage.py shell` can list ids")
        if row.status not in FINAL_STATUSES:
            raise CommandError(
                f"task {task} is {row.status}; evolution learns from finished tasks only"
            )
        config = agent_config()
        report = evolve_task(task_id=task, config=config.evolution, agent_config=config)
        out = self.stdout.write
        out(f"task {task} ({report.outcome})")
        if report.already_evolved:
            lessons = row.lessons.select_related("pitfall").order_by("id")
            out(f"already learned from ({lessons.count()} lesson(s)); nothing new:")
            for lesson in lessons:
                out(f"  lesson [{lesson.category}] {lesson.text}")
            return
        if report.environment_failure:
            out("nothing learned: the task failed because of its environment, not the agent")
            return
        if not report.lessons:
            out("nothing learned: no mistakes in this task's events")
        for lesson in report.lessons:
            out(f"  lesson [{lesson.category}] {lesson.text}")
            out(
                f"    -> pitfall {lesson.pitfall_id} {lesson.pitfall_status}, occurrences "
                f"{lesson.occurrences}, confidence {lesson.confidence:.2f}"
            )
        for reason in report.rejected:
            out(f"  refused: {reason}")
        if report.proposed_prompt_version:
            out(f"proposed prompt version {report.proposed_prompt_version} (approve it in admin)")
