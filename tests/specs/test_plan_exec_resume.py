"""Resuming plan_exec tasks (issue 15): `POST /api/tasks/<id>/resume` and `manage.py
resume_task` refuse a live task (task_alive) and a finished one or one without a confirmed spec
(not_resumable), and resume an interrupted one from its confirmed spec without asking the planner
again; a review whose run died waiting (the process restarted while `awaiting_review`) is answered
by a continuation run instead of staying stuck, and gets its one `spec_review_resolved`; a live
run keeps its heartbeat while it waits, so a reply resumes that run and starts no second one."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from apps.engine.plan.planner import parse_draft
from apps.specs.models import Spec
from apps.specs.services import spec_review_open, spec_set_status, spec_store
from apps.tasks.dispatch.liveness import HEARTBEAT_SECONDS
from apps.tasks.models import Task
from apps.tasks.run.runner import run_task
from tests.specs.conftest import (
    PLANNER,
    WORKER,
    client_of,
    events,
    new_task,
    pending_review,
    spec_json,
    task_row,
    wait_until,
)
from tests.tasks.factories import add_events

pytestmark = pytest.mark.django_db(transaction=True)


def task_with_spec(user, ws, *, spec_status: str, task_status: str, stale: bool) -> Task:
    """A plan_exec task as a run leaves it: its spec stored (and reviewed or executing), the
    run's first events; `stale`: the run's heartbeat stopped a minute ago (its process died)."""
    task = new_task(user, ws)
    draft, _ = parse_draft(spec_json(), "goal")
    spec = spec_store(task_id=task.pk, draft=draft)
    add_events(task, "task_started")
    if spec_status == "pending_review":
        review = spec_review_open(spec_id=spec.pk)
        add_events(task, "spec_review_request")
        event = task.events.get(type="spec_review_request")
        event.data = {"spec_review_id": review.review_id, "spec_id": spec.pk, "revision": 1}
        event.save()
    else:
        spec_set_status(spec_id=spec.pk, status=spec_status)
    Task.objects.filter(pk=task.pk).update(status=task_status)
    # The run that holds it: its heartbeat fresh, or stopped a minute ago (liveness.py).
    beat = timezone.now() - timedelta(seconds=60) if stale else timezone.now()
    Task.objects.filter(pk=task.pk).update(run_owner="host:1:run", heartbeat_at=beat)
    return Task.objects.get(pk=task.pk)


def test_resume_refuses_live_finished_and_unplanned_plan_exec_tasks(workspace):
    user, ws, _ = workspace
    client = client_of(user)
    live = task_with_spec(user, ws, spec_status="executing", task_status="running", stale=False)
    assert client.get(f"/api/tasks/{live.pk}").json()["resumable"] is False
    response = client.post(f"/api/tasks/{live.pk}/resume")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "task_alive"
    assert "still running" in response.json()["error"]["message"]
    with pytest.raises(CommandError, match="still running"):
        call_command("resume_task", str(live.pk))

    done = task_with_spec(user, ws, spec_status="done", task_status="completed", stale=True)
    response = client.post(f"/api/tasks/{done.pk}/resume")
    assert response.json()["error"]["code"] == "not_resumable"
    assert (
        "already ended (completed); there is nothing to resume"
        in (response.json()["error"]["message"])
    )
    with pytest.raises(CommandError, match="already ended"):
        call_command("resume_task", str(done.pk))

    unplanned = new_task(user, ws)
    Task.objects.filter(pk=unplanned.pk).update(status="running")
    response = client.post(f"/api/tasks/{unplanned.pk}/resume")
    assert response.json()["error"]["code"] == "not_resumable"
    assert "no confirmed spec" in response.json()["error"]["message"]
    assert client.get(f"/api/tasks/{unplanned.pk}").json()["resumable"] is False


async def test_an_interrupted_plan_exec_task_resumes_through_the_api_without_replanning(
    workspace, spec_config
):
    user, ws, _ = workspace
    spec_config([WORKER])  # no planner turn: asking the planner again would fail the task
    task = await sync_to_async(task_with_spec)(
        user, ws, spec_status="executing", task_status="running", stale=True
    )
    client = await sync_to_async(client_of)(user)
    payload = (await sync_to_async(client.get)(f"/api/tasks/{task.pk}")).json()
    assert payload["resumable"] is True
    response = await sync_to_async(client.post)(f"/api/tasks/{task.pk}/resume")
    assert response.status_code == 202 and response.json()["resumed"] is True

    def finished():
        row = task_row(task.pk)
        return row if row.status not in ("running", "queued") else None

    assert (await wait_until(finished, timeout=60)).status == "completed"
    kinds = [e.type for e in await sync_to_async(events)(task.pk)]
    assert kinds.count("task_started") == 2 and kinds.count("task_finished") == 1

    def spec_done():  # the lifecycle hook ends the spec right after the final status
        return Spec.objects.filter(task_id=task.pk, status="done").exists()

    assert await wait_until(spec_done)


async def test_a_reply_to_a_review_whose_run_died_starts_a_continuation_run(workspace, spec_config):
    user, ws, _ = workspace
    spec_config([WORKER])
    task = await sync_to_async(task_with_spec)(
        user, ws, spec_status="pending_review", task_status="awaiting_review", stale=True
    )
    spec = await sync_to_async(Spec.objects.get)(task_id=task.pk)
    client = await sync_to_async(client_of)(user)
    response = await sync_to_async(client.post)(
        f"/api/specs/{spec.pk}/review",
        json.dumps({"decision": "confirm"}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["continued"] is True

    def finished():
        row = task_row(task.pk)
        return row if row.status in ("completed", "failed") else None

    assert (await wait_until(finished, timeout=60)).status == "completed"
    stored = await sync_to_async(events)(task.pk)
    kinds = [e.type for e in stored]
    assert kinds[:4] == [
        "task_started",
        "spec_review_request",
        "spec_review_resolved",  # the dead run's request gets its one resolution
        "task_started",
    ]
    assert kinds.count("spec_review_resolved") == 1
    resolved = next(e.data for e in stored if e.type == "spec_review_resolved")
    assert (resolved["decision"], resolved["spec_id"]) == ("confirmed", spec.pk)
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))


async def test_a_run_awaiting_review_keeps_its_heartbeat_so_a_reply_resumes_it_not_a_new_run(
    workspace, spec_config
):
    user, ws, _ = workspace
    spec_config([PLANNER, WORKER])
    task = await sync_to_async(new_task)(user, ws)
    running = asyncio.create_task(run_task(task.pk))
    review = await wait_until(pending_review(task.pk))
    old = timezone.now() - timedelta(seconds=60)
    await sync_to_async(Task.objects.filter(pk=task.pk).update)(heartbeat_at=old)

    def beaten():  # the live run touches its task again while it waits
        return Task.objects.filter(pk=task.pk, heartbeat_at__gt=old).exists()

    await wait_until(beaten, timeout=HEARTBEAT_SECONDS * 5)
    client = await sync_to_async(client_of)(user)
    response = await sync_to_async(client.post)(
        f"/api/specs/{review.spec_id}/review",
        json.dumps({"decision": "confirm"}),
        content_type="application/json",
    )
    assert response.json()["continued"] is False  # the waiting run goes on itself
    assert await asyncio.wait_for(running, 60) == "completed"
    kinds = [e.type for e in await sync_to_async(events)(task.pk)]
    assert kinds.count("task_started") == 1 and kinds.count("spec_review_resolved") == 1
