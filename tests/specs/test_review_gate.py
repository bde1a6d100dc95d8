"""The spec review gate (seed 000 U8, R8, KTD-5, AE4) through the runner, on SQLite: a plan_exec
task drafts a spec, waits for a person, and confirm / reject / timeout / cancel each end the
request with exactly one `spec_review_resolved`."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from apps.specs.services import spec_review_reply
from apps.tasks.run.runner import run_task
from apps.tasks.services import task_request_cancel
from tests.specs.conftest import (
    PLANNER,
    REVISED,
    WORKER,
    events,
    kinds,
    new_task,
    pending_review,
    specs_of,
    task_row,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)


def reply(user, review_id, decision, feedback=""):
    return sync_to_async(spec_review_reply)(
        user=user, review_id=review_id, decision=decision, feedback=feedback
    )


def review_request(task_id):
    def spec_review_request_stored():
        return next((e.data for e in events(task_id) if e.type == "spec_review_request"), None)

    return spec_review_request_stored


def resolved(task_id):
    return [e.data for e in events(task_id) if e.type == "spec_review_resolved"]


async def test_plan_task_waits_for_review_and_a_confirm_executes_the_spec(workspace, spec_config):
    user, ws, _ = workspace
    spec_config([PLANNER, WORKER])
    task = await sync_to_async(new_task)(user, ws)
    running = asyncio.create_task(run_task(task.pk))

    review = await wait_until(pending_review(task.pk))
    assert review.review_id == f"{review.spec_id}:spec_review"
    row = await sync_to_async(task_row)(task.pk)
    assert row.status == "awaiting_review" and not running.done()  # suspended on the gate
    # the run writes the request's event right after it opened the review: wait for it too
    request = await wait_until(review_request(task.pk))
    assert request["spec_review_id"] == review.review_id and request["revision"] == 1
    assert [p["id"] for p in request["spec"]["phases"]] == ["draft", "check"]
    assert request["spec"]["phases"][1]["depends_on"] == ["draft"]

    await reply(user, review.review_id, "confirm")
    assert await asyncio.wait_for(running, 60) == "completed"

    all_kinds = await sync_to_async(kinds)(task.pk)
    assert all_kinds.count("task_started") == 1 and all_kinds.count("task_finished") == 1
    assert all_kinds.index("spec_review_request") < all_kinds.index("spec_review_resolved")
    assert all_kinds.index("spec_review_resolved") < all_kinds.index("final_answer")
    assert [r["decision"] for r in await sync_to_async(resolved)(task.pk)] == ["confirmed"]
    # the spec's verification commands were added to the checks (a non-Python workspace has none)
    checks = [
        e.data for e in await sync_to_async(events)(task.pk) if e.type == "verification_result"
    ]
    assert checks[-1]["commands"] == ["test -f notes.txt"] and checks[-1]["passed"]
    [spec] = await sync_to_async(specs_of)(task.pk)
    assert spec.status == "done"


async def test_reject_replans_with_the_feedback_and_reviews_the_new_revision(
    workspace, spec_config
):
    user, ws, _ = workspace
    spec_config([REVISED, PLANNER, WORKER])
    task = await sync_to_async(new_task)(user, ws)
    running = asyncio.create_task(run_task(task.pk))

    first = await wait_until(pending_review(task.pk))
    await reply(user, first.review_id, "reject", "please mention the date")
    second = await wait_until(pending_review(task.pk))
    assert second.spec_id != first.spec_id
    await reply(user, second.review_id, "confirm")
    assert await asyncio.wait_for(running, 60) == "completed"

    r1, r2 = await sync_to_async(specs_of)(task.pk)
    assert (r1.revision, r1.status, r1.feedback) == (1, "rejected", "please mention the date")
    assert (r2.revision, r2.status) == (2, "done") and "Mentions the date" in r2.draft["summary"]
    decisions = [(r["revision"], r["decision"]) for r in await sync_to_async(resolved)(task.pk)]
    assert decisions == [(1, "rejected"), (2, "confirmed")]
    assert (await sync_to_async(kinds)(task.pk)).count("spec_review_request") == 2


async def test_no_decision_in_time_parks_the_task_and_a_later_confirm_continues_it(
    workspace, spec_config
):
    user, ws, _ = workspace
    spec_config([PLANNER, WORKER], review={"timeout_seconds": 0.5})
    task = await sync_to_async(new_task)(user, ws)
    assert await asyncio.wait_for(run_task(task.pk), 30) == "parked"

    row = await sync_to_async(task_row)(task.pk)
    [spec] = await sync_to_async(specs_of)(task.pk)
    assert (row.status, spec.status, row.error) == ("parked", "parked", None)
    first_run = await sync_to_async(kinds)(task.pk)
    assert "error" not in first_run and first_run[-1] == "task_finished"
    assert (await sync_to_async(events)(task.pk))[-1].data["status"] == "parked"
    assert [r["decision"] for r in await sync_to_async(resolved)(task.pk)] == ["timed_out"]

    # Resume: confirming the parked spec queues the same task for a continuation run from the
    # stored spec (the script has a single planner reply: replanning would exhaust it).
    outcome = await reply(user, f"{spec.pk}:spec_review", "confirm")
    assert outcome.continue_task
    assert (await sync_to_async(task_row)(task.pk)).status == "queued"
    assert await asyncio.wait_for(run_task(task.pk), 60) == "completed"
    all_kinds = await sync_to_async(kinds)(task.pk)
    assert all_kinds.count("task_started") == 2 and all_kinds.count("task_finished") == 2
    assert all_kinds.count("spec_review_request") == 1  # no replanning, no second review
    [spec] = await sync_to_async(specs_of)(task.pk)
    assert spec.status == "done"


async def test_cancel_during_review_resolves_it_cancelled_without_deadlock(workspace, spec_config):
    user, ws, _ = workspace
    spec_config([PLANNER, WORKER])
    task = await sync_to_async(new_task)(user, ws)
    running = asyncio.create_task(run_task(task.pk))
    review = await wait_until(pending_review(task.pk))

    await sync_to_async(task_request_cancel)(task=await sync_to_async(task_row)(task.pk))
    assert await asyncio.wait_for(running, 10) == "cancelled"
    assert [r["decision"] for r in await sync_to_async(resolved)(task.pk)] == ["cancelled"]
    with pytest.raises(Exception, match="already resolved"):
        await reply(user, review.review_id, "confirm")


async def test_a_review_lost_while_awaited_fails_the_task_and_still_resolves_it(
    workspace, spec_config
):
    user, ws, _ = workspace
    spec_config([PLANNER, WORKER])
    task = await sync_to_async(new_task)(user, ws)
    running = asyncio.create_task(run_task(task.pk))
    review = await wait_until(pending_review(task.pk))

    await sync_to_async(review.delete)()  # the gate's wait fails
    assert await asyncio.wait_for(running, 10) == "failed"
    all_kinds = await sync_to_async(kinds)(task.pk)
    assert all_kinds[-3:] == ["spec_review_resolved", "error", "task_finished"]
    assert [r["decision"] for r in await sync_to_async(resolved)(task.pk)] == ["cancelled"]


async def test_review_disabled_runs_the_spec_without_waiting(workspace, spec_config):
    user, ws, _ = workspace
    spec_config([PLANNER, WORKER], review={"enabled": False})
    task = await sync_to_async(new_task)(user, ws)
    assert await asyncio.wait_for(run_task(task.pk), 60) == "completed"
    all_kinds = await sync_to_async(kinds)(task.pk)
    assert "spec_review_request" not in all_kinds and "spec_review_resolved" not in all_kinds
    [spec] = await sync_to_async(specs_of)(task.pk)
    assert spec.status == "done"


async def test_a_planner_that_never_gives_a_valid_spec_fails_the_task_with_invalid_spec(
    workspace, spec_config
):
    user, ws, _ = workspace
    bad = {
        "match": "^(Plan this task|That spec is invalid)",
        "role": "user",
        "repeat": True,
        "text": "no JSON here",
    }
    spec_config([bad, WORKER], extra="planner: {max_attempts: 2}")
    task = await sync_to_async(new_task)(user, ws)
    assert await asyncio.wait_for(run_task(task.pk), 30) == "failed"
    row = await sync_to_async(task_row)(task.pk)
    assert row.error["error_code"] == "invalid_spec" and "2 attempt" in row.error["message"]
    all_kinds = await sync_to_async(kinds)(task.pk)
    assert "spec_review_request" not in all_kinds and all_kinds[-2:] == ["error", "task_finished"]
    assert await sync_to_async(specs_of)(task.pk) == []


async def test_a_parked_task_can_be_cancelled_and_then_no_longer_resumed(workspace, spec_config):
    from apps.specs.selectors import specs_for_user

    user, ws, _ = workspace
    spec_config([PLANNER, WORKER], review={"timeout_seconds": 0.3})
    task = await sync_to_async(new_task)(user, ws)
    assert await run_task(task.pk) == "parked"
    parked = await sync_to_async(specs_for_user)(user=user, status="parked")
    assert [s.task_id for s in parked] == [task.pk]

    assert await sync_to_async(task_request_cancel)(task=await sync_to_async(task_row)(task.pk))
    assert (await sync_to_async(task_row)(task.pk)).status == "cancelled"
    assert await sync_to_async(specs_for_user)(user=user, status="parked") == []
    [spec] = await sync_to_async(specs_of)(task.pk)
    with pytest.raises(Exception, match="already resolved"):
        await reply(user, f"{spec.pk}:spec_review", "confirm")


async def test_the_planner_is_shown_the_pitfalls_retrieved_for_the_goal(workspace, spec_config):
    from apps.evolution.models import Pitfall

    user, ws, _ = workspace
    await sync_to_async(Pitfall.objects.create)(
        workspace=ws,
        trigger="release note forgotten date",
        advice="put the release date in the note",
        category="verification_failure",
        severity="high",
        status="active",
        confidence=0.8,
    )
    # The only planner reply answers a request that carries the pitfall: without it, no spec.
    seen = {**PLANNER, "match": "(?s)^Plan this task.*Pitfalls seen before.*release date"}
    spec_config([seen, WORKER], review={"enabled": False})
    task = await sync_to_async(new_task)(user, ws, goal="write the release note with its date")
    assert await asyncio.wait_for(run_task(task.pk), 60) == "completed"


async def test_a_run_stopped_outright_while_waiting_still_resolves_its_review(
    workspace, spec_config
):
    user, ws, _ = workspace
    spec_config([PLANNER, WORKER])
    task = await sync_to_async(new_task)(user, ws)
    running = asyncio.create_task(run_task(task.pk))
    review = await wait_until(pending_review(task.pk))

    running.cancel()  # e.g. the serving process shuts down mid-wait
    with pytest.raises(asyncio.CancelledError):
        await running
    assert [r["decision"] for r in await sync_to_async(resolved)(task.pk)] == ["cancelled"]
    await sync_to_async(review.refresh_from_db)()
    assert review.decision == "cancelled"
    assert (await sync_to_async(task_row)(task.pk)).status == "cancelled"
