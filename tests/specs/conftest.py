"""Fixtures of the spec tests: a small non-Python workspace (its verification is whatever the spec
declares), a scripted planner and worker, and a config with a short review timeout."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import yaml
from asgiref.sync import sync_to_async
from django.test import Client

from apps.specs.models import Spec, SpecReview
from apps.tasks.models import Task, TaskEvent
from tests.tasks.conftest import config_file  # noqa: F401  (fixture used here)
from tests.tasks.factories import make_task, make_user, make_workspace

GOAL = "write the release note"


def spec_json(revision_note: str = "", commands=("test -f notes.txt",)) -> str:
    return json.dumps(
        {
            "goal": GOAL,
            "summary": f"Write notes.txt.{revision_note}",
            "phases": [
                {"id": "draft", "title": "Draft the note", "instructions": "Write notes.txt."},
                {
                    "id": "check",
                    "title": "Check the note",
                    "role": "reviewer",
                    "depends_on": ["draft"],
                },
            ],
            "verification_commands": list(commands),
            "acceptance_criteria": ["notes.txt exists"],
        }
    )


PLANNER = {"match": "^Plan this task as a spec", "role": "user", "text": spec_json()}
REVISED = {
    "match": "(?s)^Plan this task as a spec.*Reviewer feedback.*mention the date",
    "role": "user",
    "text": spec_json(" Mentions the date."),
}
# The run after confirmation: it answers only when the confirmed spec is in the goal message.
WORKER = {
    "match": r"(?s)Confirmed spec \(revision \d\).*\[draft\] Draft the note",
    "role": "user",
    "repeat": True,
    "text": "Done: notes.txt holds the release note.",
}


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("release 1.0\n")
    user = make_user("alice")
    return user, make_workspace("notes", root, user), root


@pytest.fixture
def spec_config(config_file, tmp_path):  # noqa: F811
    """`spec_config(turns, **spec_review)`: the scripted model plays `turns`."""

    def use(turns, *, review: dict | None = None, extra: str = ""):
        script = tmp_path / "script.yaml"
        script.write_text(yaml.safe_dump({"turns": turns}))
        review = {"enabled": True, "timeout_seconds": 30, "poll_interval_ms": 50, **(review or {})}
        return config_file(
            f"""
            models:
              main: {{provider: scripted, script: {json.dumps(str(script))}}}
            spec_review: {json.dumps(review)}
            {extra}
            """
        )

    return use


def new_task(user, workspace, goal=GOAL):
    return make_task(user, workspace, goal=goal, mode="plan_exec")


def events(task_id) -> list[TaskEvent]:
    return list(TaskEvent.objects.filter(task_id=task_id).order_by("seq"))


def kinds(task_id) -> list[str]:
    return [e.type for e in events(task_id)]


async def wait_until(predicate, timeout: float = 30.0):
    """Poll a database predicate (a sync function) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await sync_to_async(predicate)()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {predicate.__name__}")


def pending_review(task_id):
    def pending_review_of_task():
        return (
            SpecReview.objects.filter(spec__task_id=task_id, decision="pending")
            .select_related("spec")
            .first()
        )

    return pending_review_of_task


def task_row(task_id) -> Task:
    return Task.objects.get(pk=task_id)


def specs_of(task_id) -> list[Spec]:
    return list(Spec.objects.filter(task_id=task_id).order_by("revision"))


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client
