"""The chat as people already know it (issue 30), in real Chromium against a real Daphne server
with the shipped offline scripted model: Enter sends and Shift+Enter adds a line; a follow-up
leaves the first turn on screen; a message sent while a turn runs (an Answer too) is queued
(cancellable) and starts after it, never two runs at once; the URL names the conversation and the task, so Back,
Forward and reload work; the sidebar lists conversations by their first message, renamable; a
spec waiting for review says so plainly and takes the box's text as feedback; tool cards say
what happened; 360 px keeps the conversation most of the height."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.support import agentkit_server

pytestmark = pytest.mark.e2e

FIX = "fix the failing test in tests/test_slug.py"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with agentkit_server(tmp_path_factory.mktemp("thread")) as running:
        yield running


def type_and_enter(page: Page, text: str, mode: str | None = None) -> None:
    if mode:
        page.locator("#mode").select_option(mode)
    box = page.locator("#message")
    box.fill(text)
    box.press("Enter")


def turn(page: Page, text: str):
    return page.locator("article.task").filter(has=page.locator(".bubble.user", has_text=text))


def reset_demo(page: Page) -> None:
    page.wait_for_function("() => window.agentkitCsrf && window.agentkitChat.openTask")
    status = page.evaluate(
        """fetch('/api/workspaces/demo/reset', {method: 'POST', headers: {'Content-Type':
        'application/json', 'X-CSRFToken': window.agentkitCsrf()}, body: '{}'}).then(r => r.status)"""
    )
    assert status == 200, status


def events(page: Page, task_id: str) -> list[dict]:
    return page.evaluate(f"fetch('/api/tasks/{task_id}/events').then(r => r.json())")["events"]


@pytest.mark.parametrize("width", [1280, 360])
def test_enter_sends_and_a_follow_up_queued_during_a_run_keeps_the_thread(
    page: Page, server, artifacts, width
):
    page.set_viewport_size({"width": width, "height": 760})
    log_in(page, server)
    reset_demo(page)  # the slug bug is there to fix again
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator(".empty-chat .example")).to_have_count(3)  # example prompts
    expect(page.locator("#mode option:checked")).to_have_text("Agent")
    expect(page.locator("#composer-limit")).to_contain_text("Shift+Enter adds a line")

    # Shift+Enter adds a line and sends nothing; Enter sends.
    box = page.locator("#message")
    box.fill("first line")
    box.press("Shift+Enter")
    box.press_sequentially("second line")
    expect(box).to_have_value("first line\nsecond line")
    page.wait_for_timeout(300)
    expect(page.locator("article.task")).to_have_count(0)
    type_and_enter(page, FIX, mode="react")
    expect(box).to_have_value("")
    first = turn(page, FIX)
    expect(first.locator("[data-role=status]")).to_have_text("running")
    expect(page).to_have_url(re.compile(r"\?c=\d+#task-\d+$"))
    first_url = page.url

    # Sent while the first turn runs, in Answer mode (which needs no workspace): queued in the
    # same thread, below it, with a Cancel button, until the turn above ends.
    type_and_enter(page, "hello again", mode="direct_chat")
    second = turn(page, "hello again")
    notice = second.locator("[data-role=queued-notice]")
    expect(notice).to_contain_text("Queued")
    expect(notice).to_contain_text("starts when the turn above")
    expect(second.locator("[data-role=cancel-queued]")).to_be_visible()
    # one Cancel: the header's Stop/Cancel stays hidden while the notice offers it
    expect(second.locator("button:visible", has_text="Cancel")).to_have_count(1)
    expect(second.locator("[data-role=status]")).to_contain_text("waiting for task #")
    expect(second.locator(".thinking")).to_be_hidden()
    expect(page.locator("article.task")).to_have_count(2)
    assert page.locator("article.task").first.get_attribute("data-task-id") == first.get_attribute(
        "data-task-id"
    )
    page.locator("#messages").evaluate("m => { m.scrollTop = m.scrollHeight; }")
    page.screenshot(path=str(artifacts / f"chat-thread-queued-{width}px.png"))

    expect(first.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    expect(second.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    # the wait is told in the past once it is over
    expect(notice).to_have_text(re.compile(r"^Waited for task #\d+ to end\.$"))
    # Both turns stay on screen, oldest first; the finished turn's tool cards are folded.
    expect(page.locator("article.task")).to_have_count(2)
    expect(first.locator(".bubble.assistant").last).to_contain_text("Fixed slugify")
    expect(first.locator("details.tool-card[open]")).to_have_count(0)
    read = first.locator("details.tool-card[data-tool=read_file]")
    expect(read.locator("summary")).to_contain_text("textkit/slug.py · slugify")
    edit = first.locator("details.tool-card[data-tool=str_replace_editor]")
    expect(edit.locator("summary")).to_contain_text("replace text in textkit/slug.py")

    # Never two runs at once: the queued turn started after the first one finished.
    first_id, second_id = first.get_attribute("data-task-id"), second.get_attribute("data-task-id")
    finished = next(e for e in events(page, first_id) if e["type"] == "task_finished")
    started = next(e for e in events(page, second_id) if e["type"] == "task_started")
    assert started["ts"] >= finished["ts"]
    waited = [e["data"] for e in events(page, second_id) if e["type"] == "task_waiting"]
    assert waited and waited[0]["waiting_for"] == int(first_id)
    assert waited[0]["mode"] == "direct_chat"
    assert "earlier turn" in waited[0]["reason"]

    # The sidebar: one conversation, titled by its first message, the latest turn's state.
    conversation = page.locator("#task-history li.conversation").first
    if width == 360:
        page.get_by_role("button", name="☰ Chats").click()
    expect(conversation.locator("[data-role=conversation-title]")).to_have_text(FIX)
    expect(conversation).to_contain_text("2 turns")
    if width == 360:
        page.get_by_role("button", name="Close").click()
    page.screenshot(path=str(artifacts / f"chat-thread-{width}px.png"))

    # Reload keeps the thread; Back returns to the first turn's URL and task.
    page.reload()
    expect(page.locator("article.task")).to_have_count(2)
    expect(second.locator("[data-role=status]")).to_have_text("completed")
    assert page.url.endswith(f"#task-{second_id}")
    page.go_back()
    expect(page).to_have_url(first_url)
    expect(page.locator(f"article.task[data-task-id='{first_id}']")).to_be_visible()

    # Narrow screens: nothing overflows and the conversation gets most of the height.
    if width == 360:
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        pane = page.locator("#messages").bounding_box()
        assert pane["height"] > 0.6 * 760, pane


def test_rename_a_conversation_and_a_queued_turn_can_be_cancelled(page: Page, server):
    log_in(page, server)
    page.get_by_role("button", name="New conversation").click()
    type_and_enter(page, FIX, mode="react")
    first = turn(page, FIX).last
    expect(first.locator("[data-role=status]")).to_have_text("running")
    type_and_enter(page, "never mind this one")
    queued = turn(page, "never mind this one")
    queued.locator("[data-role=cancel-queued]").click()
    expect(queued.locator("[data-role=status]")).to_have_text("cancelled")
    expect(first.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)

    entry = page.locator("#task-history li.conversation.current")
    entry.get_by_role("button", name=re.compile("Rename conversation")).click()
    title = entry.get_by_label("Conversation title")
    title.fill("The slug fix")
    title.press("Enter")
    expect(page.locator("#task-history li.conversation").first).to_contain_text("The slug fix")
    page.reload()
    expect(page.locator("#task-history li.conversation").first).to_contain_text("The slug fix")


@pytest.mark.parametrize("width", [1280, 360])
def test_a_spec_waiting_for_review_says_so_and_takes_the_box_as_feedback(
    page: Page, server, artifacts, width
):
    page.set_viewport_size({"width": width, "height": 760})
    log_in(page, server)
    page.get_by_role("button", name="New conversation").click()
    type_and_enter(page, FIX, mode="plan_exec")
    task = page.locator("article.task").last
    expect(task.locator('.spec-card[data-revision="1"]')).to_be_visible(timeout=TASK_MS)
    badge = task.locator("[data-role=status]")
    expect(badge).to_have_text("Waiting for your review")
    page.wait_for_timeout(1500)  # longer than the thinking indicator's delay
    expect(task.locator(".thinking")).to_be_hidden()
    clock = task.locator("[data-role=elapsed]").text_content()
    page.wait_for_timeout(1200)
    assert task.locator("[data-role=elapsed]").text_content() == clock  # no running clock
    expect(task.locator("[data-role=steps]")).to_be_hidden()  # no "step 0"
    if width == 360:
        page.get_by_role("button", name="☰ Chats").click()
    expect(
        page.locator("#task-history li.conversation").first.locator(".conversation-head-row .badge")
    ).to_have_text("review")
    if width == 360:
        page.get_by_role("button", name="Close").click()
    # The box offers to send its text as feedback on the spec: the planner revises it.
    expect(page.locator("#send")).to_have_text("Send as feedback")
    page.screenshot(path=str(artifacts / f"chat-review-{width}px.png"))
    type_and_enter(page, "also keep the separator configurable")
    expect(task.locator('.spec-card[data-revision="2"]')).to_be_visible(timeout=TASK_MS)
    expect(task.locator('.spec-card[data-revision="1"]')).to_contain_text(
        "also keep the separator configurable"
    )
    expect(page.locator("article.task")).to_have_count(1)  # no new task was started
    if width == 360:
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    task.get_by_role("button", name="Stop").click()  # frees the workspace for the next test
    expect(badge).to_have_text("cancelled")
