"""Conversations: a follow-up continues the same conversation (history, same workspace), they
belong to their user, and usage adds up per conversation with the prompt-cache hit rate."""

from __future__ import annotations

import threading

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from apps.tasks.events.history import conversation_history
from apps.tasks.models import Conversation, Task
from apps.tasks.run.runner import run_task
from apps.tasks.services import ApplicationError, api_token_create, task_create
from tests.fakes.llm_server import FakeLLMServer
from tests.tasks.conftest import events_of
from tests.tasks.factories import add_events, make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = [
    {
        "text": "Let me look.",
        "tool_calls": [{"name": "read_file", "arguments": {"path": "textkit/slug.py"}}],
        "match": "capital of France",
    },
    {"text": "The capital of France is Paris.", "after_tool": "read_file"},
    {"text": "Paris has about 2.1 million people.", "match": "population"},
]


def bearer(user) -> dict:
    _, key = api_token_create(user=user)
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


@pytest.fixture
def people(tmp_path):
    alice, bob = make_user("alice"), make_user("bob")
    yield {
        "alice": alice,
        "bob": bob,
        "alpha": make_workspace("alpha", tmp_path / "a", alice),
        "beta": make_workspace("beta", tmp_path / "b", bob),
        "shared": make_workspace("shared", tmp_path / "s", alice, bob),
    }
    # Tasks posted to the API run inline on their own threads: let them end before the test's
    # database is flushed, so none writes events for a task that no longer exists.
    for thread in threading.enumerate():
        if thread.name.startswith("task-"):
            thread.join(timeout=30)


def _post(user, **body):
    return Client().post("/api/tasks", body, content_type="application/json", **bearer(user))


# ── creating tasks in a conversation ───────────────────────────────────────────────────────────
def test_api_follow_up_continues_the_conversation_in_its_workspace(people):
    first = _post(people["alice"], workspace="alpha", text="@chat hello").json()
    assert first["conversation"]
    follow = _post(people["alice"], conversation=first["conversation"], text="@chat and then?")
    assert follow.status_code == 201, follow.json()
    second = Task.objects.get(pk=follow.json()["id"])
    assert second.conversation_id == first["conversation"] and second.workspace.name == "alpha"
    fresh = _post(people["alice"], workspace="alpha", text="@chat new topic").json()
    assert fresh["conversation"] != first["conversation"]
    listed = Client().get("/api/tasks", **bearer(people["alice"])).json()["tasks"]
    assert {t["id"]: t["conversation"] for t in listed} == {
        first["id"]: first["conversation"],
        second.pk: first["conversation"],
        fresh["id"]: fresh["conversation"],
    }


def test_another_users_conversation_is_not_found_even_in_a_shared_workspace(people):
    bobs = _post(people["bob"], workspace="shared", text="@chat secret plan").json()
    response = _post(people["alice"], conversation=bobs["conversation"], text="@chat continue")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "conversation not found" in response.json()["error"]["message"]
    assert Task.objects.filter(user=people["alice"]).count() == 0
    detail = Client().get(f"/api/conversations/{bobs['conversation']}", **bearer(people["alice"]))
    assert detail.status_code == 404


def test_conversation_in_another_workspace_or_not_an_id_is_refused_with_advice(people):
    first = _post(people["alice"], workspace="alpha", text="@chat hello").json()
    moved = _post(people["alice"], workspace="shared", conversation=first["conversation"], text="x")
    assert moved.status_code == 400 and moved.json()["error"]["code"] == "workspace_mismatch"
    assert "start a new conversation" in moved.json()["error"]["message"]
    bad = _post(people["alice"], conversation="latest", text="x")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_field"


def test_service_refuses_a_foreign_conversation(people):
    from apps.tasks.conf import agent_config

    theirs = Conversation.objects.create(user=people["bob"], workspace=people["shared"])
    with pytest.raises(ApplicationError) as caught:
        task_create(
            user=people["alice"],
            workspace=None,
            text="hi",
            config=agent_config(),
            conversation=theirs.pk,
        )
    assert caught.value.extra["error_code"] == "not_found"


async def test_socket_follow_up_joins_the_conversation_and_a_foreign_one_gets_an_error_frame(
    people,
):
    from tests.tasks.test_consumer import expect_error, open_socket

    theirs = await sync_to_async(Conversation.objects.create)(
        user=people["bob"], workspace=people["shared"]
    )
    mine = await sync_to_async(Conversation.objects.create)(
        user=people["alice"], workspace=people["alpha"]
    )
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to(
        {"type": "user_message", "text": "@chat hi", "conversation": theirs.pk}
    )
    frame = await expect_error(communicator, "not_found")
    assert "conversation" in frame["data"]["error_struct"]["message"]
    await communicator.send_json_to(
        {"type": "user_message", "text": "@chat hi", "conversation": mine.pk, "client_msg_id": "m1"}
    )
    started = await communicator.receive_json_from(timeout=10)
    assert started["type"] == "task_started" and started["data"]["conversation"] == mine.pk
    task = await sync_to_async(Task.objects.get)(client_msg_id="m1")
    assert task.conversation_id == mine.pk and task.workspace_id == people["alpha"].pk
    await communicator.disconnect()


# ── history ────────────────────────────────────────────────────────────────────────────────────
def test_history_holds_earlier_answers_and_compressed_tool_work_and_is_byte_stable(people):
    alice, alpha = people["alice"], people["alpha"]
    convo = Conversation.objects.create(user=alice, workspace=alpha)
    first = make_task(alice, alpha, goal="what is in slug.py?", conversation=convo)
    first.status, first.result = "completed", "It defines slugify."
    first.save()
    add_events(first, "task_started")
    from django.utils import timezone

    for seq, (kind, data) in enumerate(
        [
            ("tool_call", {"call_id": "c1", "name": "read_file", "arguments": {"path": "s.py"}}),
            (
                "tool_result",
                {
                    "call_id": "c1",
                    "name": "read_file",
                    "ok": True,
                    "output": "def slugify(text):\n  ...",
                },
            ),
        ],
        start=2,
    ):
        first.events.create(seq=seq, type=kind, data=data, ts=timezone.now())
    failed = make_task(alice, alpha, goal="run it", conversation=convo, status="failed")
    failed.error = {"message": "the sandbox is missing"}
    failed.save()
    running = make_task(alice, alpha, goal="still going", conversation=convo, status="running")
    current = make_task(alice, alpha, goal="and now?", conversation=convo)
    other = make_task(alice, alpha, goal="unrelated", conversation=None)

    history = conversation_history(current)
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[0].content == "what is in slug.py?"
    assert 'read_file {"path": "s.py"} -> ok: def slugify(text):' in history[1].content
    assert history[1].content.endswith("It defines slugify.")
    assert "ended failed: the sandbox is missing" in history[3].content
    assert running.goal not in str(history)
    assert conversation_history(current) == history  # rebuilt byte-identically
    assert conversation_history(other) == ()


async def test_follow_up_task_sends_the_earlier_turn_to_the_model(demo, config_file):
    user, workspace, root = demo
    (root / "AGENTS.md").write_text("Always answer in one sentence.")
    with FakeLLMServer(SCRIPT) as server:
        config_file(
            f"""
            models: {{main: {{provider: openai, model: fake, base_url: "{server.openai_base_url}"}}}}
            sandbox: {{mode: "off"}}
            """
        )
        convo = await sync_to_async(Conversation.objects.create)(user=user, workspace=workspace)
        first = await sync_to_async(make_task)(
            user, workspace, goal="what is the capital of France?", conversation=convo
        )
        assert await run_task(first.pk) == "completed"
        second = await sync_to_async(make_task)(
            user, workspace, goal="and its population?", conversation=convo
        )
        assert await run_task(second.pk) == "completed"
        bodies = [r.body for r in server.requests]
        body = bodies[-1]
    texts = [m.get("content") or "" for m in body["messages"]]
    assert body["messages"][0]["role"] == "system"
    assert "Always answer in one sentence." in texts[0] and "- workspace: demo" in texts[0]
    assert texts[1:] == [
        "what is the capital of France?",
        texts[2],
        "and its population?",
    ]
    assert "The capital of France is Paris." in texts[2] and "read_file" in texts[2]
    started = (await sync_to_async(events_of)(second))[0]
    assert started.data["conversation"] == convo.pk
    # The follow-up repeats the first turn's system prompt byte for byte, so its prompt prefix
    # comes from the cache.
    assert all(b["messages"][0] == bodies[0]["messages"][0] for b in bodies)
    second = await sync_to_async(Task.objects.get)(pk=second.pk)
    assert second.usage["cache_read_tokens"] > 0


# ── usage ──────────────────────────────────────────────────────────────────────────────────────
def test_conversation_usage_adds_up_tasks_and_gives_the_cache_hit_rate(people):
    alice, alpha = people["alice"], people["alpha"]
    convo = Conversation.objects.create(user=alice, workspace=alpha, title="t")
    usage = {
        "input_tokens": 1000,
        "output_tokens": 10,
        "cache_read_tokens": 900,
        "cache_write_tokens": 50,
        "llm_calls": 2,
    }
    make_task(alice, alpha, conversation=convo, usage=usage, cost=0.01, status="completed")
    make_task(
        alice, alpha, conversation=convo, usage={**usage, "cache_read_tokens": 500}, cost=0.02
    )
    detail = Client().get(f"/api/conversations/{convo.pk}", **bearer(alice)).json()
    assert detail["usage"]["input_tokens"] == 2000
    assert detail["usage"]["cache_read_tokens"] == 1400
    assert detail["usage"]["cache_write_tokens"] == 100
    assert detail["usage"]["cache_hit_rate"] == 0.7
    assert detail["usage"]["cost"] == pytest.approx(0.03)
    assert [t["id"] for t in detail["tasks"]] == sorted(t["id"] for t in detail["tasks"])
    listed = Client().get("/api/conversations", **bearer(alice)).json()["conversations"]
    assert [c["id"] for c in listed] == [convo.pk]
    task = Client().get(f"/api/tasks/{detail['tasks'][0]['id']}", **bearer(alice)).json()
    assert task["usage"]["cache_hit_rate"] == 0.9 and task["conversation"] == convo.pk


def test_a_task_that_opens_a_conversation_has_no_history_and_a_follow_up_has_it(
    people, django_assert_num_queries
):
    """services.task_create marks the task that opened its conversation: the runner's history
    needs no query for it; the follow-up's history is read (and holds the first turn)."""
    from apps.tasks.conf import agent_config

    alice, alpha = people["alice"], people["alpha"]
    first = task_create(user=alice, workspace=alpha, text="@chat hi", config=agent_config())
    with django_assert_num_queries(0):
        assert conversation_history(first) == ()
    assert conversation_history(Task.objects.get(pk=first.pk)) == ()  # read again: it looks
    first.status, first.result = "completed", "Hello."
    first.save()
    follow = task_create(
        user=alice,
        workspace=None,
        text="@chat and then?",
        config=agent_config(),
        conversation=first.conversation_id,
    )
    assert not follow.opens_conversation
    assert [m.content for m in conversation_history(follow)] == ["hi", "Hello."]


# ── renaming (the sidebar's Rename) ────────────────────────────────────────────────────────────
def _patch(user, conversation_id, body):
    return Client().patch(
        f"/api/conversations/{conversation_id}",
        body,
        content_type="application/json",
        **bearer(user),
    )


def test_a_conversation_is_renamed_by_its_owner_and_keeps_its_place(people):
    mine = Conversation.objects.create(
        user=people["alice"], workspace=people["alpha"], title="first message"
    )
    before = Conversation.objects.get(pk=mine.pk).updated_at
    renamed = _patch(people["alice"], mine.pk, {"title": "  The   slug fix  "})
    assert renamed.status_code == 200, renamed.json()
    assert renamed.json()["title"] == "The slug fix"
    again = Conversation.objects.get(pk=mine.pk)
    assert again.title == "The slug fix" and again.updated_at == before
    listed = Client().get("/api/conversations", **bearer(people["alice"])).json()
    assert listed["conversations"][0]["title"] == "The slug fix"


def test_renaming_refuses_an_empty_or_long_title_and_another_users_conversation(people):
    mine = Conversation.objects.create(user=people["alice"], workspace=people["alpha"], title="t")
    for title in ("   ", None, "x" * 201):
        refused = _patch(people["alice"], mine.pk, {"title": title})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "invalid_field"
        assert "'title'" in refused.json()["error"]["message"]
    theirs = Conversation.objects.create(user=people["bob"], workspace=people["shared"], title="b")
    assert _patch(people["alice"], theirs.pk, {"title": "mine now"}).status_code == 404
    assert Conversation.objects.get(pk=theirs.pk).title == "b"
    assert Conversation.objects.get(pk=mine.pk).title == "t"
