"""A misbehaving model through the fake LLM server and the real runner, on SQLite (PostgreSQL:
tests/tasks/test_model_text_postgres.py): lone surrogates, NUL, ANSI and other control
characters in the answer, in reasoning and in tool-call arguments; a tool printing NUL and bytes
that are not UTF-8; an answer longer than limits.answer_chars. Every task ends with its final
status stored, contiguous events and exactly one task_finished."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings

from apps.engine.llm.text import REPLACEMENT, storable
from apps.tasks.doors.consumers import task_group
from apps.tasks.events.history import HISTORY_MAX_CHARS, conversation_history
from apps.tasks.models import Conversation, Task, TaskEvent
from apps.tasks.run.runner import run_task
from apps.tasks.services import api_token_create
from tests.fakes.llm_server import FakeLLMServer
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task
from tests.tasks.model_text import (
    ANY_TEXT,
    CASES,
    ERROR_STORED,
    LONG_ANSWER,
    PRINTED_BAD,
    TOOL_OUTPUT_SCRIPT,
    case_faults,
    case_script,
    error_faults,
    expected_result,
    unstorable_in,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def llm(config_file):
    with FakeLLMServer() as server:
        config_file(
            f"""
            models: {{main: {{provider: openai, model: fake, base_url: "{server.openai_base_url}"}}}}
            llm: {{retries: {{max_attempts: 1}}}}
            sandbox: {{mode: "off"}}
            limits: {{answer_chars: 1000}}
            """
        )
        yield server


def ended_cleanly(task_id: int) -> tuple[Task, list]:
    task = Task.objects.get(pk=task_id)
    events = events_of(task)
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    assert task.last_seq == len(events)
    assert [event.type for event in events].count("task_finished") == 1
    assert events[-1].type == "task_finished"
    assert events[-1].data["status"] == task.status
    return task, events


@pytest.mark.parametrize("case", CASES, ids=[f"{kind}-{place}" for kind, place in CASES])
async def test_a_misbehaving_model_still_ends_its_task(demo, llm, case):
    kind, place = case
    user, workspace, _ = demo
    llm.set_script(case_script(kind, place))
    llm.fail_next(*case_faults(kind, place))
    task = await sync_to_async(make_task)(user, workspace, goal="what is the answer?")
    assert await run_task(task.pk) == "completed"

    def check():
        stored, events = ended_cleanly(task.pk)
        assert stored.result == expected_result(kind, place)
        assert unstorable_in([e.data for e in events]) == []
        if place == "arguments":
            (call,) = [e for e in events if e.type == "tool_call"]
            assert REPLACEMENT in call.data["arguments"]["path"] or kind == "control"

    await sync_to_async(check)()


async def test_tool_output_with_nul_and_bytes_that_are_not_utf8_is_stored(demo, llm):
    user, workspace, _ = demo
    llm.set_script(TOOL_OUTPUT_SCRIPT)
    task = await sync_to_async(make_task)(user, workspace, goal="print it")
    assert await run_task(task.pk) == "completed"

    def check():
        _, events = ended_cleanly(task.pk)
        (result,) = [e for e in events if e.type == "tool_result"]
        assert result.data["ok"] is True
        assert PRINTED_BAD in result.data["output"]
        assert unstorable_in([e.data for e in events]) == []

    await sync_to_async(check)()


def bearer(user) -> dict:
    _, key = api_token_create(user=user)
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


async def test_a_long_answer_is_stored_once_in_full_and_events_carry_a_marked_cut(demo, llm):
    """limits.answer_chars is 1000 here: the task's result holds the whole answer; final_answer
    and task_finished hold its first 1000 characters, a marker and its length."""
    user, workspace, _ = demo
    answer = LONG_ANSWER
    assert len(answer) > HISTORY_MAX_CHARS  # the history gives a cut too
    llm.set_script([answer])
    conversation = await sync_to_async(Conversation.objects.create)(user=user, workspace=workspace)
    task = await sync_to_async(make_task)(user, workspace, goal="long", conversation=conversation)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(task_group(task.pk), channel)
    assert await run_task(task.pk) == "completed"
    broadcast = {}  # what other processes' sockets get
    while "task_finished" not in broadcast:
        message = await asyncio.wait_for(layer.receive(channel), 5)
        broadcast.update((event["type"], event["data"]) for event in message["events"])
    assert "final_full" not in broadcast["task_finished"]
    assert broadcast["task_finished"]["final_chars"] == len(answer)
    assert len(broadcast["task_finished"]["final"]) < 1200
    assert len(broadcast["final_answer"]["text"]) < 1200

    def check():
        stored, events = ended_cleanly(task.pk)
        assert stored.result == answer
        final = next(e for e in events if e.type == "final_answer").data
        finished = events[-1].data
        for data, key in ((final, "text"), (finished, "final")):
            assert data[key].startswith(answer[:1000])
            assert data[key][1000:].startswith("\n\n[… answer cut here")
            assert f"{len(answer):,} characters" in data[key]
            assert data[f"{key}_truncated"] is True and data[f"{key}_chars"] == len(answer)
        assert "final_full" not in finished
        assert all(answer not in json.dumps(e.data, ensure_ascii=False) for e in events[-2:])
        response = Client().get(f"/api/tasks/{task.pk}", **bearer(user))
        assert response.status_code == 200 and response.json()["result"] == answer
        follow_up = make_task(user, workspace, goal="and then?", conversation=conversation)
        _, reply = conversation_history(follow_up)
        assert answer[:2000] in reply.content and len(reply.content) < len(answer)
        assert f"{len(answer.strip()):,} characters" in reply.content

    await sync_to_async(check)()


async def test_a_short_answer_is_not_marked(demo, llm):
    user, workspace, _ = demo
    llm.set_script(["Short."])
    task = await sync_to_async(make_task)(user, workspace, goal="short")
    assert await run_task(task.pk) == "completed"

    def check():
        stored, events = ended_cleanly(task.pk)
        assert stored.result == "Short." == events[-1].data["final"]
        assert "final_truncated" not in events[-1].data

    await sync_to_async(check)()


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=ANY_TEXT)
def test_any_text_made_storable_is_written_to_a_task_and_its_event_on_sqlite(demo, text):
    """A task's result (a text column) and an event's data (JSON), written and read back."""
    user, workspace, _ = demo
    fixed = storable(text)
    task = make_task(user, workspace, goal="property", result=fixed)
    event = TaskEvent.objects.create(
        task=task, seq=1, type="final_answer", data={"text": fixed, fixed: 1}, ts=timezone.now()
    )
    assert Task.objects.get(pk=task.pk).result == fixed
    assert TaskEvent.objects.get(pk=event.pk).data == {"text": fixed, fixed: 1}


async def test_an_error_body_with_nul_and_a_lone_surrogate_still_ends_the_task(demo, llm):
    """The endpoint's error text reaches the error event, the task's error and the owner's
    original_error: made storable like the model's text."""
    user, workspace, _ = demo
    llm.fail_next(*error_faults())
    task = await sync_to_async(make_task)(user, workspace, goal="what is the answer?")
    assert await run_task(task.pk) == "failed"

    def check():
        stored, events = ended_cleanly(task.pk)
        assert unstorable_in([e.data for e in events]) == []
        assert stored.error["error_code"]
        assert unstorable_in([stored.error, stored.original_error]) == []
        assert ERROR_STORED in stored.original_error

    await sync_to_async(check)()
