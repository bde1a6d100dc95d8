"""The chat page as a person uses it: real Daphne, real socket, the offline scripted model."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_login import log_in
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    """The shipped config, with the scripted model streaming slowly enough to reload mid-task."""
    tmp = tmp_path_factory.mktemp("chat")
    shipped = (ROOT / "agentkit.yaml").read_text()
    config = tmp / "agentkit.yaml"
    config.write_text(shipped.replace("chunk_delay_ms: 25", "chunk_delay_ms: 90"))
    assert config.read_text() != shipped
    with agentkit_server(tmp, AGENTKIT_CONFIG=str(config)) as server:
        yield server


def sent_task(page: Page):
    """The article of the task just sent. The page may have opened the latest conversation
    (an earlier test's) before the message went: the new turn is then a follow-up, shown below
    that task once its first event came (the "Starting…" placeholder goes then)."""
    expect(page.locator(".pending-task")).to_have_count(0, timeout=10_000)
    return page.locator("article.task").last


def rendered_seqs(page: Page, task_id: str) -> list[int]:
    return page.evaluate(f"window.agentkitRendered[{task_id}] || []")


def test_demo_task_streams_survives_a_reload_and_finishes(page: Page, slow_server, artifacts):
    log_in(page, slow_server)
    page.locator("#message").fill("fix the failing test in tests/test_slug.py")
    page.get_by_role("button", name="Send").click()

    task = page.locator("article.task").first
    expect(task.locator(".bubble.user")).to_have_text("fix the failing test in tests/test_slug.py")
    expect(task.locator(".bubble.assistant").first).not_to_be_empty(timeout=10_000)
    expect(task.locator('.tool-card[data-tool="read_file"]')).to_be_visible(timeout=10_000)
    expect(task.locator("[data-role=status]")).to_have_text("running")
    page.screenshot(path=str(artifacts / "chat-streaming.png"), full_page=True)

    # Reload while the task is still running: the page resumes from the stored events.
    expect(page).to_have_url(re.compile(r"#task-\d+$"))
    task_id = page.url.rsplit("-", 1)[1]
    page.reload()
    task = page.locator(f'article.task[data-task-id="{task_id}"]')
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=30_000)

    expect(task.locator(".bubble.user")).to_have_count(1)
    expect(task.locator('.tool-card[data-tool="read_file"]')).to_have_count(1)
    expect(task.locator('.tool-card[data-tool="str_replace_editor"]')).to_have_count(1)
    expect(task.locator(".tool-card.ok")).to_have_count(2)
    seqs = rendered_seqs(page, task_id)
    assert seqs == list(range(1, len(seqs) + 1)), seqs  # no gap, no duplicate, in order
    expect(task.locator(".task-footer")).to_contain_text("tokens in")
    assert "[^a-zA-Z0-9]+" in task.locator(".bubble.assistant").last.inner_text()

    # The edit card shows the diff; the history sidebar lists the task.
    edit = task.locator('.tool-card[data-tool="str_replace_editor"]')
    edit.locator("summary").click()
    expect(edit.locator(".result")).to_be_visible()
    expect(page.locator("#task-history")).to_contain_text("fix the failing test")
    page.screenshot(path=str(artifacts / "chat-completed-after-reload.png"), full_page=True)

    # The API tells the same story.
    api = page.request.get(f"{slow_server.url}/api/tasks/{task_id}/events?after=0").json()["events"]
    assert [e["seq"] for e in api] == seqs


def test_chat_mode_answers_without_tools(page: Page, slow_server, artifacts):
    log_in(page, slow_server)
    page.locator("#message").fill("@chat hello")
    page.get_by_role("button", name="Send").click()
    task = sent_task(page)
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=30_000)
    expect(task.locator(".bubble.assistant")).to_contain_text("offline scripted model")
    expect(task.locator(".tool-card")).to_have_count(0)


def test_a_dropped_connection_reconnects_and_loses_nothing(page: Page, slow_server, artifacts):
    log_in(page, slow_server)
    page.locator("#message").fill("fix the failing test in tests/test_slug.py")
    page.get_by_role("button", name="Send").click()
    task = sent_task(page)
    expect(task.locator(".bubble.assistant").first).not_to_be_empty(timeout=10_000)
    task_id = task.get_attribute("data-task-id")
    page.evaluate("window.agentkitSocket.drop()")
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=30_000)
    # it reconnects by itself (after a backoff: on a busy machine the run may end first)
    page.wait_for_function("window.agentkitSocket.opens >= 2", timeout=30_000)
    seqs = rendered_seqs(page, task_id)
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    stored = page.request.get(f"{slow_server.url}/api/tasks/{task_id}/events?after=0").json()[
        "events"
    ]
    assert len(stored) == len(seqs)
    # (the earlier test fixed the demo already: the model reads slugify and finds nothing to do)
    expect(task.locator('.tool-card[data-tool="read_file"]')).to_have_count(1)


def test_a_message_whose_socket_died_as_it_went_still_gets_its_task_once(
    page: Page, slow_server, artifacts
):
    """The socket closes in the same moment the message leaves: the server makes the task, but
    the page never hears of it on that socket. On the next socket the page sends the same message
    again (same client_msg_id) and shows that task, from its first event, once."""
    log_in(page, slow_server)
    page.locator("#message").fill("@chat hello from a dying socket")
    expect(page.locator("body")).to_have_attribute("data-socket", "open")
    page.evaluate("document.querySelector('#send').click(); window.agentkitSocket.drop();")
    task = sent_task(page)
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=30_000)
    expect(task.locator(".bubble.user")).to_have_text("hello from a dying socket")
    assert page.evaluate("window.agentkitSocket.opens") >= 2
    task_id = task.get_attribute("data-task-id")
    seqs = rendered_seqs(page, task_id)
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    listed = page.request.get(f"{slow_server.url}/api/tasks?q=dying").json()["tasks"]
    assert [t["id"] for t in listed] == [int(task_id)]  # one task, not one per sending
