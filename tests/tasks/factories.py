from __future__ import annotations

from django.contrib.auth import get_user_model

from apps.tasks.models import Task, TaskEvent, Workspace


def make_user(name: str, password: str = "pw-123-secret"):
    return get_user_model().objects.create_user(name, password=password)


def make_workspace(name: str, root, *members) -> Workspace:
    workspace = Workspace.objects.create(name=name, root_dir=str(root))
    workspace.members.add(*members)
    return workspace


def make_task(user, workspace, goal="do a thing", mode="react", **fields) -> Task:
    return Task.objects.create(user=user, workspace=workspace, mode=mode, goal=goal, **fields)


def add_events(task: Task, *types: str) -> list[TaskEvent]:
    from django.utils import timezone

    events = []
    for kind in types:
        task.last_seq += 1
        events.append(
            TaskEvent.objects.create(
                task=task,
                seq=task.last_seq,
                type=kind,
                data={"n": task.last_seq},
                ts=timezone.now(),
            )
        )
    task.save(update_fields=["last_seq"])
    return events
