"""The dashboard in a real browser: tasks run through the real runner with the offline scripted
model (a @plan task that fails verification, is re-injected, reflects and passes, with a pitfall
injected; a react task), then the chat's Dashboard link opens the page and its SVG charts show
those tasks."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in

pytestmark = pytest.mark.e2e

PITFALL = """
from apps.evolution.models import Pitfall
from apps.tasks.models import Workspace
Pitfall.objects.create(
    workspace=Workspace.objects.get(name="demo"), category="verification_failure",
    trigger="slugify keeps punctuation between separators in the failing test",
    advice="collapse every run of non-alphanumeric characters", severity="high", status="active",
    confidence=0.9,
)
"""


def run(page: Page, text: str) -> None:
    page.locator("#message").fill(text)
    page.get_by_role("button", name="Send").click()
    # the chat shows the goal without the mode prefix
    task = page.locator("article.task").filter(has_text=text.removeprefix("@plan "))
    if text.startswith("@plan "):  # a plan is reviewed before it runs: confirm the spec card
        card = task.locator('.spec-card[data-revision="1"]')
        card.get_by_role("button", name="Confirm").click(timeout=TASK_MS)
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)


def test_dashboard_opened_from_the_chat_charts_the_tasks_that_ran(page: Page, server, artifacts):
    server.manage("shell", "-c", PITFALL)
    log_in(page, server)
    run(page, "@plan fix the failing test in tests/test_slug.py")
    run(page, "hello, what can you do?")

    page.get_by_role("link", name="Dashboard").click()
    expect(page).to_have_url(f"{server.url}/dashboard/")
    expect(page.get_by_role("heading", name="Dashboard", level=1)).to_be_visible()

    outcomes = page.locator("svg#chart-outcomes rect.bar")
    expect(outcomes).to_have_count(1)  # both tasks today, both completed
    expect(outcomes).to_have_attribute("data-series", "completed")
    expect(outcomes).to_have_attribute("data-value", "2")

    tokens = page.locator("svg#chart-tokens rect.bar")
    categories = {tokens.nth(i).get_attribute("data-category") for i in range(tokens.count())}
    assert len(categories) == 2 and all(re.fullmatch(r"#\d+", c) for c in categories)
    expect(page.locator("svg#chart-tokens rect.bar[data-series=output]")).to_have_count(2)
    expect(
        page.locator("svg#chart-tokens rect.bar[data-series='cached prompt']").first
    ).to_be_visible()

    expect(page.locator("svg#chart-cache circle.point")).to_have_count(1)

    verification = page.locator("svg#chart-verification rect.bar")
    expect(verification).to_have_count(1)
    expect(verification).to_have_attribute("data-series", "passed after reflection")

    pitfalls = page.locator("svg#chart-pitfalls rect.bar")
    expect(pitfalls).to_have_count(1)
    expect(pitfalls).to_have_attribute("data-series", "task completed")

    # each bar says what it is: the <title> is the tooltip and what a screen reader reads
    expect(verification.locator("title")).to_have_text(
        re.compile(r"^\d\d-\d\d — 1 of 1 passed \(100%\) · passed after reflection: 1$")
    )
    page.screenshot(path=str(artifacts / "dashboard.png"), full_page=True)

    page.get_by_label("Period").select_option("7")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"/dashboard/\?.*days=7"))
    expect(page.locator("svg#chart-outcomes rect.bar")).to_have_count(1)
