"""Replies to a spec review over the JSON API and the WebSocket: a decision resumes the waiting
run; unknown or foreign ids, resolved reviews and decisions outside confirm/reject are refused
with a clear message and change nothing; a parked spec confirmed over the socket continues."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from apps.engine.plan.planner import parse_draft
from apps.specs.models import Spec, SpecReview
from apps.specs.services import spec_review_open, spec_store
from apps.tasks.models import Task
from apps.tasks.run.runner import run_task
from tests.specs.conftest import (
    PLANNER,
    WORKER,
    client_of,
    kinds,
    new_task,
    pending_review,
    spec_json,
    task_row,
    wait_until,
)
from tests.tasks.factories import make_user
from tests.tasks.test_consumer import open_socket

pytestmark = pytest.mark.django_db(transaction=True)


def review_state(review_id):
    review = SpecReview.objects.select_related("spec__task").get(review_id=review_id)
    return review.decision, review.spec.status, review.spec.task.status


def open_review(user, ws):
    """A task whose spec waits for review (as the gate leaves it), without a running engine;
    its run's claim and heartbeat fresh, as a live run keeps them (apps/tasks/dispatch/liveness.py)."""
    task = new_task(user, ws)
    Task.objects.filter(pk=task.pk).update(run_owner="host:1:run", heartbeat_at=timezone.now())
    draft, _ = parse_draft(spec_json(), "goal")
    spec = spec_store(task_id=task.pk, draft=draft)
    return spec, spec_review_open(spec_id=spec.pk)


async def test_confirm_over_the_api_resumes_the_waiting_run(workspace, spec_config):
    user, ws, _ = workspace
    spec_config([PLANNER, WORKER])
    task = await sync_to_async(new_task)(user, ws)
    running = asyncio.create_task(run_task(task.pk))
    review = await wait_until(pending_review(task.pk))

    client = await sync_to_async(client_of)(user)
    response = await sync_to_async(client.post)(
        f"/api/specs/{review.spec_id}/review",
        {"decision": "confirm", "feedback": ""},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["decision"] == "confirmed"
    assert await asyncio.wait_for(running, 60) == "completed"


def test_bad_replies_over_the_api_are_refused_and_change_nothing(workspace):
    user, ws, _ = workspace
    spec, review = open_review(user, ws)
    mallory = make_user("mallory")
    url = f"/api/specs/{spec.pk}/review"
    before = review_state(review.review_id)
    assert before == ("pending", "pending_review", "awaiting_review")

    def post(client, body, path=url):
        return client.post(path, body, content_type="application/json")

    foreign = post(client_of(mallory), {"decision": "confirm"})
    assert foreign.status_code == 404 and "not found" in foreign.json()["error"]["message"]
    assert (
        post(client_of(user), {"decision": "confirm"}, "/api/specs/99999/review").status_code == 404
    )
    odd = post(client_of(user), {"decision": "maybe"})
    assert odd.status_code == 400 and "'confirm' or 'reject'" in odd.json()["error"]["message"]
    bare = post(client_of(user), {"decision": "reject"})
    assert bare.status_code == 400 and bare.json()["error"]["code"] == "feedback_required"
    assert post(client_of(user), {}).status_code == 400
    assert review_state(review.review_id) == before  # nothing changed

    assert post(client_of(user), {"decision": "reject", "feedback": "smaller"}).status_code == 200
    again = post(client_of(user), {"decision": "confirm"})
    assert again.status_code == 409 and "already resolved" in again.json()["error"]["message"]
    assert review_state(review.review_id) == ("rejected", "rejected", "awaiting_review")
    assert Spec.objects.get(pk=spec.pk).feedback == "smaller"


async def test_bad_replies_over_the_socket_get_error_frames_and_change_nothing(workspace):
    user, ws, _ = workspace
    _spec, review = await sync_to_async(open_review)(user, ws)
    mallory = await sync_to_async(make_user)("mallory")
    before = await sync_to_async(review_state)(review.review_id)

    async def frame(who, **fields):
        socket = await open_socket(who)
        await socket.send_json_to({"type": "spec_review_reply", **fields})
        reply = await socket.receive_json_from(timeout=10)
        await socket.disconnect()
        return reply["type"], reply["data"]["error_struct"]["error_code"]

    rid = review.review_id
    assert await frame(mallory, spec_review_id=rid, decision="confirm") == ("error", "not_found")
    assert await frame(user, spec_review_id="7:nope", decision="confirm") == (
        "error",
        "invalid_field",
    )
    assert await frame(user, spec_review_id=rid, decision="approve") == ("error", "invalid_field")
    assert await frame(user, spec_review_id=rid) == ("error", "missing_fields")
    assert await sync_to_async(review_state)(rid) == before


async def test_a_parked_spec_confirmed_over_the_socket_continues_the_task(workspace, spec_config):
    user, ws, _ = workspace
    spec_config([PLANNER, WORKER], review={"timeout_seconds": 0.3})
    task = await sync_to_async(new_task)(user, ws)
    assert await run_task(task.pk) == "parked"
    review_id = (
        await wait_until(lambda: SpecReview.objects.filter(spec__task=task).first())
    ).review_id

    socket = await open_socket(user)
    await socket.send_json_to(
        {"type": "spec_review_reply", "spec_review_id": review_id, "decision": "confirm"}
    )
    frames = []  # the whole task, replayed: the parked run, then the continuation run
    while len([f for f in frames if f["type"] == "task_finished"]) < 2:
        frames.append(await socket.receive_json_from(timeout=60))
    await socket.disconnect()
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    ends = [f["data"]["status"] for f in frames if f["type"] == "task_finished"]
    assert ends == ["parked", "completed"]
    assert (await sync_to_async(task_row)(task.pk)).status == "completed"
    assert (await sync_to_async(kinds)(task.pk)).count("task_started") == 2


def test_specs_are_listed_and_read_by_their_owner_only(workspace):
    user, ws, _ = workspace
    spec, review = open_review(user, ws)
    mine = client_of(user)
    listed = mine.get("/api/specs").json()["specs"]
    assert [(s["id"], s["spec_review_id"], s["status"]) for s in listed] == [
        (spec.pk, review.review_id, "pending_review")
    ]
    assert mine.get("/api/specs?status=parked").json()["specs"] == []
    bad = mine.get("/api/specs?status=sleeping")
    assert bad.status_code == 400 and "parked" in bad.json()["error"]["message"]
    detail = mine.get(f"/api/specs/{spec.pk}").json()
    assert [p["id"] for p in detail["spec"]["phases"]] == ["draft", "check"]
    stranger = client_of(make_user("mallory"))
    assert stranger.get(f"/api/specs/{spec.pk}").status_code == 404
    assert stranger.get("/api/specs").json()["specs"] == []
