"""Events that age well (issue 41): `events.retention` folds a finished task's token events —
one per unbroken run of a step's text — and its chat replay, rendered as the chat renders it
(static/turns.js: a bubble per step's text, `restart` empties it, reasoning in its own card,
team phases in their own lanes), is the same; `prune_events` keeps the goal and the end."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.utils import timezone

from apps.tasks.models import Task, TaskEvent
from apps.tasks.ops.retention import fold_task, sweep
from apps.tasks.run.runner import run_task
from apps.tasks.selectors import task_events_after_id
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)


def render(messages: list[dict]) -> list:
    """What the chat shows for these messages, as static/turns.js builds it."""
    shown: list = []
    bubble: dict = {}  # lane (phase_id) -> index of its open text bubble
    thinking: dict = {}  # lane -> (step key, index of its reasoning card)
    for message in messages:
        data, kind = message["data"], message["type"]
        lane = data.get("phase_id")
        if kind == "token":
            if data.get("restart"):
                if lane in bubble:
                    shown[bubble[lane]][1] = ""
                continue
            if lane not in bubble:
                shown.append(["bubble", ""])
                bubble[lane] = len(shown) - 1
            shown[bubble[lane]][1] += data.get("text") or ""
        elif kind == "reasoning":
            key = (lane, data.get("step"))
            if data.get("restart"):
                if lane in thinking and thinking[lane][0] == key:
                    shown[thinking[lane][1]][2] = ""
                continue
            if lane not in thinking or thinking[lane][0] != key:
                bubble.pop(lane, None)
                shown.append(["thinking", key, ""])
                thinking[lane] = (key, len(shown) - 1)
            shown[thinking[lane][1]][2] += data.get("text") or ""
        else:
            bubble.pop(lane, None)
            shown.append([kind, data])
    return shown


def replay(task_id: int) -> list[dict]:
    """What a socket (or GET /api/tasks/<id>/events) replays of the task."""
    return [event.as_message() for event in task_events_after_id(task_id=task_id)]


def stored(task: Task, events: list[tuple[str, dict]]) -> None:
    now = timezone.now()
    TaskEvent.objects.bulk_create(
        TaskEvent(task=task, seq=seq, type=kind, data=data, ts=now)
        for seq, (kind, data) in enumerate(events, start=1)
    )
    Task.objects.filter(pk=task.pk).update(
        last_seq=len(events), status="completed", finished_at=now - timedelta(days=40)
    )


def tokens(step: int, *texts: str, **extra) -> list[tuple[str, dict]]:
    return [("token", {"step": step, "text": text, **extra}) for text in texts]


def test_a_finished_run_folds_to_a_few_rows_and_replays_the_same(demo, config_file):
    config_file("models:\n  main: {provider: scripted, model: scripted-demo, chunk_delay_ms: 0}\n")
    user, workspace, _ = demo
    task = make_task(user, workspace, goal="fix the failing slug test")
    assert async_to_sync(run_task)(task.pk) == "completed"
    before = replay(task.pk)
    assert sum(m["type"] == "token" for m in before) > 3  # the demo streams its answers
    Task.objects.filter(pk=task.pk).update(finished_at=timezone.now() - timedelta(days=40))

    assert sweep(30, force=True) == (1, len(before) - TaskEvent.objects.filter(task=task).count())
    after = replay(task.pk)

    assert render(after) == render(before)
    steps = {m["data"].get("step") for m in before if m["type"] == "token"}
    assert sum(m["type"] == "token" for m in after) <= len(steps) + 1
    assert [m for m in after if m["type"] != "token"] == [
        m for m in before if m["type"] != "token"
    ]  # every other event as it was, seq included
    assert sweep(30, force=True) == (0, 0)  # once


def test_restarts_reasoning_and_team_lanes_fold_without_changing_what_the_chat_shows(demo):
    user, workspace, _ = demo
    task = make_task(user, workspace, goal="a long one")
    events = [
        ("task_started", {"mode": "react", "goal": "a long one"}),
        ("reasoning", {"step": 1, "text": "think "}),
        ("reasoning", {"step": 1, "text": "hard"}),
        *tokens(1, "Let me ", "read it."),
        ("tool_call", {"step": 1, "call_id": "a", "name": "read_file", "arguments": {}}),
        ("tool_result", {"step": 1, "call_id": "a", "name": "read_file", "ok": True}),
        *tokens(2, "dropped ", "text"),
        ("token", {"step": 2, "restart": True}),
        *tokens(2, "The ", "answer ", "is 42."),
        *tokens(3, "half", " gone"),
        ("token", {"step": 3, "restart": True}),
        ("phase_started", {"phase_id": "a", "title": "A"}),
        *tokens(1, "alpha ", "one", phase_id="a"),
        *tokens(1, "beta ", "one", phase_id="b"),
        *tokens(1, " two", phase_id="a"),
        ("final_answer", {"step": 3, "text": "The answer is 42."}),
        ("task_finished", {"status": "completed"}),
    ]
    stored(task, events)
    before = replay(task.pk)

    removed = fold_task(task.pk)

    after = replay(task.pk)
    assert render(after) == render(before)
    assert removed == len(before) - len(after) == 9
    assert [m["seq"] for m in after] == sorted(m["seq"] for m in after)


def test_prune_events_keeps_the_goal_and_the_end_and_a_dry_run_deletes_nothing(demo):
    user, workspace, _ = demo
    old, recent = make_task(user, workspace, goal="old"), make_task(user, workspace, goal="new")
    events = [("task_started", {"goal": "g"}), *tokens(1, "a", "b"), ("task_finished", {})]
    stored(old, events)
    stored(recent, events)
    Task.objects.filter(pk=recent.pk).update(finished_at=timezone.now() - timedelta(days=3))

    out = StringIO()
    call_command("prune_events", "--older-than", "30d", "--dry-run", stdout=out)
    assert "would delete 2 event rows of 1 task(s)" in out.getvalue()
    assert TaskEvent.objects.count() == 8
    call_command("prune_events", "--older-than", "30d", stdout=out)
    assert [m["type"] for m in replay(old.pk)] == ["task_started", "task_finished"]
    assert len(replay(recent.pk)) == 4
