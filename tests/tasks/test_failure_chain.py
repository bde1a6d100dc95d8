"""Failure handling through the runner (the path of the WebSocket, the JSON API and batch runs):
the fake LLM server fails, the task ends with error_struct, salvage and Retry; the owner alone
sees original_error; no internal path reaches what the browser gets."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import Client

from apps.tasks.models import Conversation, Task
from apps.tasks.run.runner import run_task
from apps.tasks.services import api_token_create
from tests.fakes.llm_server import FakeLLMServer, Fault
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task, make_user

pytestmark = pytest.mark.django_db(transaction=True)

EDIT = {
    "text": "Editing.",
    "tool_calls": [
        {
            "name": "str_replace_editor",
            "arguments": {
                "command": "str_replace",
                "path": "textkit/slug.py",
                "old_str": "def slugify",
                "new_str": "def slugify_v2",
            },
        }
    ],
    "match": "rename",
}
SCRIPT = [EDIT, {"text": "The answer is 42.", "match": "answer"}]


def bearer(user) -> dict:
    _, key = api_token_create(user=user)
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


@pytest.fixture
def llm(config_file):
    with FakeLLMServer(SCRIPT) as server:
        config_file(
            f"""
            models: {{main: {{provider: openai, model: fake, base_url: "{server.openai_base_url}"}}}}
            llm: {{retries: {{max_attempts: 1}}}}
            sandbox: {{mode: "off"}}
            """
        )
        yield server


def payload(user, task_id) -> dict:
    response = Client().get(f"/api/tasks/{task_id}", **bearer(user))
    assert response.status_code == 200
    return response.json()


def browser_view(task) -> str:
    """Everything a browser may get about the task: its events and the API payload."""
    return json.dumps([e.as_message() for e in events_of(task)], default=str)


def assert_no_internal_path(text: str, root) -> None:
    for path in (str(settings.BASE_DIR), sys.prefix, str(root)):
        assert path not in text, path


async def test_failed_task_gets_error_struct_and_owner_only_original_error(demo, llm):
    user, workspace, root = demo
    llm.fail_next(*(Fault.http_error(503, f"down at {root}") for _ in range(3)))
    task = await sync_to_async(make_task)(user, workspace, goal="what is the answer?")
    assert await run_task(task.pk) == "failed"

    def check():
        data = payload(user, task.pk)
        assert data["error"]["error_code"] == "llm_failure"
        assert data["error_struct"] == data["error"]
        assert data["error_struct"]["retryable"] is True and data["error_struct"]["suggestions"]
        assert data["error_message"].startswith(data["error_struct"]["message"])
        assert "Suggestions: 1)" in data["error_message"]
        assert data["original_error"].startswith("LLMStatusError: ")
        assert "HTTP 503" in data["original_error"]
        assert str(root) not in data["original_error"]  # scrubbed even for the owner
        stored = Task.objects.get(pk=task.pk)
        assert_no_internal_path(browser_view(stored), root)
        bob = make_user("bob")
        workspace.members.add(bob)
        assert "original_error" not in payload(bob, task.pk)
        types = [e.type for e in events_of(stored)]
        assert "recovery_started" in types and "recovery_finished" in types

    await sync_to_async(check)()


async def test_completed_task_payload_keeps_its_old_keys(demo, llm):
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal="what is the answer?")
    assert await run_task(task.pk) == "completed"
    data = await sync_to_async(payload)(user, task.pk)
    assert sorted(data) == sorted(
        [
            "id",
            "status",
            "mode",
            "skill",
            "goal",
            "workspace",
            "result",
            "error",
            "conversation",
            "usage",
            "cost",
            "outcome",  # verified | unverified | no_changes | error code (issue 38)
            "last_seq",
            "created_at",
            "started_at",
            "finished_at",
            "mine",  # the chat page's ownership flag (issue 12), not a failure field
        ]
    )


async def test_retry_creates_a_linked_task_that_completes_once_the_fault_is_gone(demo, llm):
    user, workspace, _ = demo
    llm.fail_next(*(Fault.rate_limit(retry_after=0.01) for _ in range(3)))
    convo = await sync_to_async(Conversation.objects.create)(user=user, workspace=workspace)
    task = await sync_to_async(make_task)(
        user, workspace, goal="what is the answer?", conversation=convo
    )
    assert await run_task(task.pk) == "failed"

    def retry():
        response = Client().post(f"/api/tasks/{task.pk}/retry", **bearer(user))
        assert response.status_code == 201, response.json()
        assert response.json()["retry_of"] == task.pk
        return response.json()["id"]

    retry_id = await sync_to_async(retry)()  # the API starts it (inline executor)
    assert await wait_final(retry_id) == "completed"
    data = await sync_to_async(payload)(user, retry_id)
    assert data["retry_of"] == task.pk and data["result"] == "The answer is 42."
    assert data["goal"] == "what is the answer?" and "error_struct" not in data
    assert data["conversation"] == convo.pk
    # the retry starts over: the failed attempt is not in its history
    last = llm.requests[-1].body["messages"]
    assert sum("what is the answer?" in (m.get("content") or "") for m in last) == 1


async def test_non_retryable_failure_refuses_retry_with_advice(demo, llm):
    user, workspace, _ = demo
    llm.fail_next(*(Fault.http_error(401, "bad key") for _ in range(3)))
    task = await sync_to_async(make_task)(user, workspace, goal="what is the answer?")
    assert await run_task(task.pk) == "failed"

    def check():
        assert payload(user, task.pk)["error_struct"]["retryable"] is False
        response = Client().post(f"/api/tasks/{task.pk}/retry", **bearer(user))
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "not_retryable"
        other = make_user("carol")
        workspace.members.add(other)
        response = Client().post(f"/api/tasks/{task.pk}/retry", **bearer(other))
        assert response.status_code == 403

    await sync_to_async(check)()


async def wait_final(task_id: int, seconds: float = 30.0) -> str:
    for _ in range(int(seconds / 0.05)):
        task = await sync_to_async(Task.objects.get)(pk=task_id)
        if task.is_finished:
            return task.status
        await asyncio.sleep(0.05)
    return task.status


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


async def test_emergency_in_a_git_workspace_salvages_the_diff(demo, llm):
    user, workspace, root = demo
    _git(root, "init", "-q")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    (root / "notes.txt").write_text("new file\n")
    # after the edit, the model's stream is cut; then nothing in the script answers any more
    llm.set_script(
        [EDIT, {"text": "Now", "after_tool": "str_replace_editor", "fail": "connection"}]
    )
    task = await sync_to_async(make_task)(user, workspace, goal="rename slugify", conversation=None)
    assert await run_task(task.pk) == "failed"

    def check():
        data = payload(user, task.pk)
        salvage = data["salvage"]
        assert salvage["source"] == "git"
        assert "textkit/slug.py" in salvage["files"] and "notes.txt" in salvage["files"]
        assert "+def slugify_v2" in salvage["diff"] and "+new file" in salvage["diff"]
        finished = events_of(Task.objects.get(pk=task.pk))[-1]
        assert finished.data["salvage"] == salvage
        assert_no_internal_path(json.dumps(data), root)

    await sync_to_async(check)()


async def test_an_echoed_api_key_reaches_neither_events_nor_api_nor_original_error(
    demo, config_file, monkeypatch
):
    user, workspace, _ = demo
    key = "sk-fake-secret-0123456789"
    monkeypatch.setenv("FAKE_LLM_KEY", key)
    with FakeLLMServer(SCRIPT) as server:
        config_file(
            f"""
            models:
              main: {{provider: openai, model: fake, base_url: "{server.openai_base_url}",
                      api_key_env: FAKE_LLM_KEY}}
            llm: {{retries: {{max_attempts: 1}}}}
            sandbox: {{mode: "off"}}
            """
        )
        server.fail_next(*(Fault.auth_echo() for _ in range(3)))
        task = await sync_to_async(make_task)(user, workspace, goal="what is the answer?")
        assert await run_task(task.pk) == "failed"

    def check():
        data = payload(user, task.pk)
        assert data["error_struct"]["error_code"] == "llm_failure"
        assert data["error_struct"]["retryable"] is False
        seen = browser_view(Task.objects.get(pk=task.pk)) + json.dumps(data)
        assert key not in seen and key[:12] not in seen
        assert "401" in data["original_error"]

    await sync_to_async(check)()
