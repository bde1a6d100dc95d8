"""`python manage.py resume_task ID [--force]`: run a plan_exec or team_collab task that a process
restart interrupted, in this process, from its last checkpoints (finished phases are not run
again; plan_exec goes on with its confirmed spec, phase, budgets and conversation)."""

from __future__ import annotations

import asyncio

from django.core.management.base import BaseCommand, CommandError

from apps.specs.checkpoints import task_resume
from apps.tasks.models import Task
from apps.tasks.services import ApplicationError


class Command(BaseCommand):
    help = "Resume an interrupted plan_exec or team_collab task from its checkpoints, here."

    def add_arguments(self, parser):
        parser.add_argument("task_id", type=int)
        parser.add_argument(
            "--force",
            action="store_true",
            help="resume even if the task's heartbeat is recent (its process is known to be gone)",
        )

    def handle(self, *args, task_id: int, force: bool, **options):
        from apps.tasks.run.runner import run_task

        task = Task.objects.filter(pk=task_id).first()
        if task is None:
            raise CommandError(f"task {task_id} does not exist")
        try:
            task_resume(task=task, force=force)
        except ApplicationError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"resuming task {task_id} from its checkpoints...")
        status = asyncio.run(run_task(task_id))
        self.stdout.write(f"task {task_id}: {status}")
        if status != "completed":
            raise CommandError(f"task {task_id} ended {status}")
