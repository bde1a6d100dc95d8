"""A conversation in the chat page: ask, get an answer, ask a follow-up that depends on it — the
model (the fake LLM server, over HTTP) receives the earlier turn; "New conversation" starts
fresh. Real Daphne, real socket, real Chromium."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.fakes.llm_server import FakeLLMServer
from tests.support import agentkit_server

pytestmark = pytest.mark.e2e

SCRIPT = [
    {"text": "The capital of France is Paris.", "match": "capital of France", "repeat": True},
    {"text": "About 2.1 million people live in Paris.", "match": "population"},
]


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(SCRIPT) as server:
        yield server


@pytest.fixture(scope="module")
def conversation_server(tmp_path_factory, llm):
    tmp = tmp_path_factory.mktemp("conversation")
    config = tmp / "agentkit.yaml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "models": {"main": llm.model_entry("openai", model="fake-chat")},
                "llm": {"retries": {"max_attempts": 1}},
                "sandbox": {"mode": "off"},
            }
        )
    )
    with agentkit_server(tmp, AGENTKIT_CONFIG=str(config)) as server:
        yield server


def ask(page: Page, text: str):
    page.locator("#message").fill(text)
    page.get_by_role("button", name="Send").click()
    task = page.locator("article.task").filter(has_text=text)
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    return task


def texts(body: dict) -> list[str]:
    return [m.get("content") or "" for m in body["messages"] if m["role"] != "system"]


def test_follow_up_sends_the_earlier_turn_and_new_conversation_starts_fresh(
    page: Page, conversation_server, llm, artifacts
):
    log_in(page, conversation_server)
    first = ask(page, "What is the capital of France?")
    expect(first.locator(".bubble.assistant")).to_contain_text("Paris")

    second = ask(page, "And what is its population?")
    expect(second.locator(".bubble.assistant")).to_contain_text("2.1 million")
    follow_up = texts(llm.requests[-1].body)
    assert follow_up[0] == "What is the capital of France?"
    assert "The capital of France is Paris." in follow_up[1]
    assert follow_up[-1] == "And what is its population?"

    # The sidebar groups both turns under one conversation; the footer shows cache figures.
    groups = page.locator("#task-history li.conversation")
    expect(groups).to_have_count(1)
    expect(groups.first).to_contain_text("capital of France")
    expect(groups.first).to_contain_text("population")
    expect(second.locator(".task-footer")).to_contain_text("hit")
    expect(second.locator("[data-role=conversation-usage]")).to_contain_text("2 turn(s)")
    page.screenshot(path=str(artifacts / "chat-conversation.png"), full_page=True)

    page.get_by_role("button", name="New conversation").click()
    fresh = ask(page, "Again: what is the capital of France?")
    expect(fresh.locator(".bubble.assistant")).to_contain_text("Paris")
    assert texts(llm.requests[-1].body) == ["Again: what is the capital of France?"]
    expect(page.locator("#task-history li.conversation")).to_have_count(2)


COMPRESSING_SCRIPT = [
    {
        "text": "## Goal\nthink three times\n## Decisions\nnone",
        "match": "Transcript to summarize",
        "repeat": True,
    },
    {
        "text": "Thinking.",
        "tool_calls": [
            {"name": "think", "arguments": {"thought": "one: " + "weigh the options " * 30}}
        ],
    },
    {
        "text": "Thinking more.",
        "tool_calls": [
            {"name": "think", "arguments": {"thought": "two: " + "weigh the options " * 30}}
        ],
    },
    {
        "text": "Last thought.",
        "tool_calls": [
            {"name": "think", "arguments": {"thought": "three: " + "weigh the options " * 30}}
        ],
    },
    {"text": "Thought it through."},
]


def test_a_compressed_context_shows_a_note_in_the_task(page: Page, tmp_path_factory, artifacts):
    tmp = tmp_path_factory.mktemp("compressing")
    with FakeLLMServer(COMPRESSING_SCRIPT) as llm:
        config = tmp / "agentkit.yaml"
        config.write_text(
            json.dumps(
                {
                    "models": {"main": llm.model_entry("openai", model="fake-chat")},
                    "compression": {
                        "threshold_tokens": 200,
                        "keep_first": 1,
                        "keep_last": 2,
                        "summary_max_tokens": 16,
                    },
                    "sandbox": {"mode": "off"},
                }
            )
        )
        with agentkit_server(tmp, AGENTKIT_CONFIG=str(config)) as server:
            log_in(page, server)
            task = ask(page, "Think it through three times.")
            note = task.locator(".compression-note").first
            expect(note).to_contain_text("Context compressed")
            expect(note).to_contain_text("summary by main")
            summarized = [
                r for r in llm.requests if "Transcript to summarize" in json.dumps(r.body)
            ]
            assert summarized and "tools" not in summarized[0].body
            task_id = task.get_attribute("data-task-id")
            events = page.request.get(f"{server.url}/api/tasks/{task_id}/events").json()["events"]
            squeezed = [e["data"] for e in events if e["type"] == "compression"]
            assert squeezed and all(d["tokens_after"] < d["tokens_before"] for d in squeezed)
            page.screenshot(path=str(artifacts / "chat-compression.png"), full_page=True)
