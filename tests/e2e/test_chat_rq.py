"""executor: rq — the task runs on a separate RQ worker and still streams to the page."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def rq_server(tmp_path_factory, redis_url):
    tmp = tmp_path_factory.mktemp("rq")
    shipped = (ROOT / "agentkit.yaml").read_text()
    config = tmp / "agentkit.yaml"
    config.write_text(
        shipped.replace("  kind: inline ", "  kind: rq ").replace(
            "chunk_delay_ms: 25", "chunk_delay_ms: 40"
        )
    )
    assert "kind: rq" in config.read_text()
    with agentkit_server(
        tmp, worker=True, AGENTKIT_CONFIG=str(config), REDIS_URL=redis_url
    ) as server:
        yield server, tmp / "worker.log"


def test_task_runs_on_the_worker_and_streams_to_the_page(page: Page, rq_server, artifacts):
    server, worker_log = rq_server
    log_in(page, server)
    page.locator("#message").fill("fix the failing test in tests/test_slug.py")
    page.get_by_role("button", name="Send").click()
    task = page.locator("article.task").first
    expect(task.locator('.tool-card[data-tool="read_file"]')).to_be_visible(timeout=TASK_MS)
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    expect(task.locator(".tool-card.ok")).to_have_count(2)
    # its first event came from the web process as the job was queued (apps/tasks/dispatch/queued.py):
    # the notice "Queued: waiting for a free worker …" became what happened once it started
    expect(task.locator("[data-role=queued-notice]")).to_have_text("Waited for a free worker.")
    task_id = task.get_attribute("data-task-id")
    page.screenshot(path=str(artifacts / "chat-rq-executor.png"), full_page=True)
    assert f"task-{task_id}" in worker_log.read_text(), "the job did not run on the RQ worker"


def test_a_task_behind_a_busy_worker_shows_at_once_that_it_waits_for_one(
    page: Page, rq_server, artifacts
):
    """One worker, busy with the first conversation's task: a task of a new conversation is
    queued behind it, and says so at once (its first event, written as its job was queued),
    with one Cancel button; when the worker takes it, the notice says what happened."""
    server, _ = rq_server
    log_in(page, server)
    page.get_by_role("button", name="New conversation").click()
    page.locator("#message").fill("fix the failing test in tests/test_slug.py")
    page.get_by_role("button", name="Send").click()
    first = page.locator("article.task").first
    expect(first.locator("[data-role=status]")).to_have_text("running", timeout=TASK_MS)
    page.get_by_role("button", name="New conversation").click()
    page.locator("#message").fill("which files are in this workspace?")
    page.get_by_role("button", name="Send").click()
    second = page.locator("article.task").first
    notice = second.locator("[data-role=queued-notice]")
    expect(notice).to_contain_text("Queued: waiting for a free worker")
    # one Cancel: the header's Stop/Cancel stays hidden while the notice offers it
    expect(second.locator("button:visible", has_text="Cancel")).to_have_count(1)
    page.screenshot(path=str(artifacts / "chat-rq-queued.png"), full_page=True)
    expect(second.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    expect(notice).to_have_text("Waited for a free worker.")
