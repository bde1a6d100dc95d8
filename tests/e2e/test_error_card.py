"""Failure handling in the chat page (issue 14): the fake LLM server fails, Recovery tries again
and fails too, the page shows the structured error — message, suggestions, Retry; once the fault
is gone, Retry runs a new linked task that completes. Real Daphne, socket, Chromium."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.fakes.llm_server import FakeLLMServer, Fault
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.e2e

SCRIPT = [{"text": "The answer is 42.", "repeat": True}]


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(SCRIPT) as server:
        yield server


@pytest.fixture(scope="module")
def failing_server(tmp_path_factory, llm):
    tmp = tmp_path_factory.mktemp("errors")
    config = tmp / "agentkit.yaml"
    config.write_text(
        json.dumps(
            {
                "models": {"main": llm.model_entry("openai", model="fake-chat")},
                "llm": {"retries": {"max_attempts": 1}},
                "sandbox": {"mode": "off"},
            }
        )
    )
    with agentkit_server(tmp, AGENTKIT_CONFIG=str(config)) as server:
        yield server


def test_failed_task_shows_structured_error_and_retry_completes(
    page: Page, failing_server, llm, artifacts
):
    log_in(page, failing_server)
    llm.fail_next(*(Fault.http_error(503, "upstream down") for _ in range(3)))
    page.locator("#message").fill("@react What is the answer?")
    page.get_by_role("button", name="Send").click()
    task = page.locator("article.task").filter(has_text="What is the answer?").first
    expect(task.locator("[data-role=status]")).to_have_text("failed", timeout=TASK_MS)
    card = task.locator("[data-role=error-card]")
    expect(card).to_have_attribute("data-error-code", "llm_failure")
    expect(card.locator(".error-message")).to_contain_text("unavailable")
    expect(card.locator(".suggestions li")).to_have_count(2)
    expect(task.locator(".note.recovery-note").first).to_contain_text("Recovery 1/1")
    # the owner sees the failure's own text; no internal path is on the page
    expect(card.locator(".original-error")).to_contain_text("HTTP 503")
    html = page.content()
    assert str(ROOT) not in html
    page.screenshot(path=str(artifacts / "chat-error-card.png"), full_page=True)

    assert llm.pending_faults == 0  # the fault is gone
    failed_id = int(task.get_attribute("data-task-id"))
    card.get_by_role("button", name="Retry").click()
    # the page opens the new task (one task on screen at a time), linked to the failed one
    expect(page).to_have_url(re.compile(rf"#task-(?!{failed_id}$)\d+$"))
    retried = page.locator("article.task").filter(has_text="The answer is 42.")
    expect(retried.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    expect(retried).to_contain_text("What is the answer?")
    retried_id = int(retried.get_attribute("data-task-id"))
    assert retried_id != failed_id
    payload = page.request.get(f"{failing_server.url}/api/tasks/{retried_id}").json()
    assert payload["retry_of"] == failed_id


def test_failed_task_shows_the_salvaged_diff_of_its_edits(
    page: Page, failing_server, llm, artifacts
):
    llm.set_script(
        [
            {
                "text": "Renaming.",
                "tool_calls": [
                    {
                        "name": "str_replace_editor",
                        "arguments": {
                            "command": "str_replace",
                            "path": "textkit/slug.py",
                            "old_str": "def slugify(",
                            "new_str": "def slugify_v2(",
                        },
                    }
                ],
                "match": "rename slugify",
            },
            # after the edit the endpoint fails, and nothing answers Recovery either
            {"text": "", "after_tool": "str_replace_editor", "fail": "server_error"},
        ]
    )
    try:
        log_in(page, failing_server)
        page.locator("#message").fill("@react rename slugify")
        page.get_by_role("button", name="Send").click()
        task = page.locator("article.task").filter(has_text="rename slugify").first
        expect(task.locator("[data-role=status]")).to_have_text("failed", timeout=TASK_MS)
        card = task.locator("[data-role=error-card]")
        expect(card.locator(".salvage summary")).to_contain_text("textkit/slug.py")
        expect(card.locator(".salvage-diff")).to_contain_text("+def slugify_v2(")
        page.screenshot(path=str(artifacts / "chat-error-salvage.png"), full_page=True)
    finally:
        llm.set_script(SCRIPT)
