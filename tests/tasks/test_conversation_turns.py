"""One run per conversation at a time (issue 30): every turn of a conversation — a direct_chat
("Answer") turn too — waits, still `queued` and cancellable, for the conversation's earlier
unfinished turn, says so in a `task_waiting` event, and starts when that turn ends; a direct_chat
of another conversation never waits; a turn parked at its review, or whose run died, holds
nothing. Real SQLite, the real runner, the scripted model."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from apps.tasks.dispatch.leases import waiting_for
from apps.tasks.models import Conversation, Task
from apps.tasks.run.runner import run_task
from apps.tasks.services import task_request_cancel
from tests.tasks.factories import make_task
from tests.tasks.test_run_guard import contiguous_with_one_end, slow_script, wait_for_event

pytestmark = pytest.mark.django_db(transaction=True)


def conversation_of(user, workspace) -> Conversation:
    return Conversation.objects.create(user=user, workspace=workspace, title="a thread")


def turn_reason(task_id: int) -> str:
    return f"waiting for the conversation's earlier turn (task #{task_id})"


async def test_an_answer_sent_during_an_agent_turn_waits_for_it_and_another_conversation_does_not(
    demo, config_file, tmp_path
):
    user, workspace, _ = demo
    config_file(
        f"models: {{main: {{provider: scripted, script: {slow_script(tmp_path, 's', 1.5)}}}}}\n"
    )
    thread = await sync_to_async(conversation_of)(user, workspace)
    other = await sync_to_async(conversation_of)(user, workspace)
    agent = await sync_to_async(make_task)(user, workspace, goal="fix it", conversation=thread)
    answer = await sync_to_async(make_task)(
        user, workspace, goal="and why?", mode="direct_chat", conversation=thread
    )
    elsewhere = await sync_to_async(make_task)(
        user, workspace, goal="hi", mode="direct_chat", conversation=other
    )
    first = asyncio.create_task(run_task(agent.pk))
    await wait_for_event(agent, "task_started")
    second = asyncio.create_task(run_task(answer.pk))
    await wait_for_event(answer, "task_waiting")
    stored = await sync_to_async(Task.objects.get)(pk=answer.pk)
    assert stored.status == "queued"
    assert await sync_to_async(waiting_for)(stored) == agent.pk  # what the API says

    # Another conversation's direct_chat is not held back, not even by the workspace.
    assert await asyncio.wait_for(run_task(elsewhere.pk), 30) == "completed"
    assert not first.done() and not second.done()
    assert await asyncio.wait_for(asyncio.gather(first, second), 60) == ["completed", "completed"]

    one = await sync_to_async(contiguous_with_one_end)(agent)
    two = await sync_to_async(contiguous_with_one_end)(answer)
    assert two[0].type == "task_waiting"
    assert two[0].data == {
        "reason": turn_reason(agent.pk),
        "waiting_for": agent.pk,
        "goal": "and why?",
        "mode": "direct_chat",
    }
    assert [e.type for e in two].count("task_waiting") == 1
    started = next(e for e in two if e.type == "task_started")
    assert one[-1].ts <= started.ts  # never two runs of the conversation at once
    three = await sync_to_async(contiguous_with_one_end)(elsewhere)
    assert "task_waiting" not in [e.type for e in three]
    assert three[-1].ts < one[-1].ts


async def test_turns_queued_behind_a_running_turn_start_in_order(demo, config_file, tmp_path):
    user, workspace, _ = demo
    config_file(
        f"models: {{main: {{provider: scripted, script: {slow_script(tmp_path, 's', 1.5)}}}}}\n"
    )
    thread = await sync_to_async(conversation_of)(user, workspace)
    turns = [
        await sync_to_async(make_task)(user, workspace, goal=goal, mode=mode, conversation=thread)
        for goal, mode in (("one", "react"), ("two", "react"), ("three", "direct_chat"))
    ]
    runs = [asyncio.create_task(run_task(turns[0].pk))]
    await wait_for_event(turns[0], "task_started")
    runs.append(asyncio.create_task(run_task(turns[2].pk)))  # the last turn asks first
    await wait_for_event(turns[2], "task_waiting")
    runs.append(asyncio.create_task(run_task(turns[1].pk)))
    assert await asyncio.wait_for(asyncio.gather(*runs), 90) == ["completed"] * 3
    events = [await sync_to_async(contiguous_with_one_end)(t) for t in turns]
    starts = [next(e.ts for e in run if e.type == "task_started") for run in events]
    ends = [run[-1].ts for run in events]
    assert ends[0] <= starts[1] and ends[1] <= starts[2]
    waited = [e.data["reason"] for e in events[2] if e.type == "task_waiting"]
    assert waited[0] == turn_reason(turns[1].pk)  # the turn right above it
    # The second turn waited for the first as its turn, not (also) for the workspace.
    assert [e.data["reason"] for e in events[1] if e.type == "task_waiting"] == [
        turn_reason(turns[0].pk)
    ]


async def test_a_turn_waiting_for_the_earlier_turn_can_be_cancelled(demo, config_file, tmp_path):
    user, workspace, _ = demo
    config_file(
        f"models: {{main: {{provider: scripted, script: {slow_script(tmp_path, 's', 3)}}}}}\n"
    )
    thread = await sync_to_async(conversation_of)(user, workspace)
    agent = await sync_to_async(make_task)(user, workspace, goal="one", conversation=thread)
    answer = await sync_to_async(make_task)(
        user, workspace, goal="two", mode="direct_chat", conversation=thread
    )
    running = asyncio.create_task(run_task(agent.pk))
    await wait_for_event(agent, "task_started")
    waiting = asyncio.create_task(run_task(answer.pk))
    await wait_for_event(answer, "task_waiting")
    assert await sync_to_async(task_request_cancel)(
        task=await sync_to_async(Task.objects.get)(pk=answer.pk)
    )
    assert await asyncio.wait_for(waiting, 10) == "cancelled"
    assert not running.done()
    assert await asyncio.wait_for(running, 60) == "completed"
    events = await sync_to_async(contiguous_with_one_end)(answer)
    assert [e.type for e in events] == ["task_waiting", "task_finished"]


async def test_a_parked_or_dead_earlier_turn_holds_nothing(demo):
    user, workspace, _ = demo
    thread = await sync_to_async(conversation_of)(user, workspace)
    long_ago = timezone.now() - timedelta(minutes=5)
    await sync_to_async(make_task)(
        user, workspace, goal="parked", mode="plan_exec", status="parked", conversation=thread
    )
    dead = await sync_to_async(make_task)(
        user, workspace, goal="dead", status="running", conversation=thread
    )
    await sync_to_async(Task.objects.filter(pk=dead.pk).update)(
        run_owner="gone-host:1:abc", heartbeat_at=long_ago
    )
    answer = await sync_to_async(make_task)(
        user, workspace, goal="hello", mode="direct_chat", conversation=thread
    )
    assert await asyncio.wait_for(run_task(answer.pk), 30) == "completed"
    events = await sync_to_async(contiguous_with_one_end)(answer)
    assert "task_waiting" not in [e.type for e in events]
