"""AE4 of seed 000 in a real browser: the spec review card of @plan. Reject with feedback → a
revised spec → Confirm → the run executes and completes; the card survives a reload while the
review is pending; no decision in time → parked → Resume later → completed."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.e2e
GOAL = "@plan fix the failing test in tests/test_slug.py"
TIMEOUT_LINE = "  timeout_seconds: 1800       # no decision within this time: parked"


@pytest.fixture
def spec_server(tmp_path):
    with agentkit_server(tmp_path) as server:
        yield server


@pytest.fixture
def short_review_server(tmp_path):
    shipped = (ROOT / "agentkit.yaml").read_text()
    assert TIMEOUT_LINE in shipped
    config = tmp_path / "agentkit.yaml"
    config.write_text(shipped.replace(TIMEOUT_LINE, "  timeout_seconds: 3"))
    with agentkit_server(tmp_path, AGENTKIT_CONFIG=str(config)) as server:
        yield server


def send(page: Page, text: str):
    page.locator("#message").fill(text)
    page.get_by_role("button", name="Send").click()
    return page.locator("article.task").first


def test_reject_with_feedback_then_confirm_the_revision_runs_to_completion(
    page: Page, spec_server, artifacts
):
    log_in(page, spec_server)
    task = send(page, GOAL)
    first = task.locator('.spec-card[data-revision="1"]')
    expect(first).to_be_visible(timeout=TASK_MS)
    expect(task.locator("[data-role=status]")).to_have_text("Waiting for your review")
    expect(first.locator(".spec-goal")).to_contain_text("Fix slugify")
    expect(first.locator("[data-phase-id]")).to_have_count(2)
    expect(first.locator('[data-phase-id="fix"]')).to_contain_text("after: read")
    expect(first.locator('[data-phase-id="fix"] [data-role=phase-role]')).to_have_text("coder")
    expect(first.locator("[data-role=verification-command]")).to_have_text(["pytest -x -q"])
    expect(first).to_contain_text("tests/test_slug.py passes")
    page.screenshot(path=str(artifacts / "spec-card-review.png"), full_page=True)

    page.reload()  # the pending review survives a reload: the card is rebuilt and still works
    task = page.locator("article.task").first
    first = task.locator('.spec-card[data-revision="1"]')
    expect(first.get_by_role("button", name="Confirm")).to_be_enabled()

    first.get_by_role("button", name="Reject").click()  # no feedback yet: nothing is sent
    expect(first.locator("[data-role=feedback]")).to_have_attribute("aria-invalid", "true")
    first.locator("[data-role=feedback]").fill("Also run ruff and the whole test suite.")
    first.get_by_role("button", name="Reject").click()
    expect(first.locator("[data-role=spec-decision]")).to_contain_text("Rejected")
    expect(first.locator("[data-role=spec-decision]")).to_contain_text("Also run ruff")

    second = task.locator('.spec-card[data-revision="2"]')
    expect(second).to_be_visible(timeout=TASK_MS)
    expect(second).to_contain_text("ruff check passes")
    second.get_by_role("button", name="Confirm").click()
    expect(second.locator("[data-role=spec-decision]")).to_contain_text("Confirmed")
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    expect(task.locator(".verify-card.ok")).to_have_count(1)
    page.screenshot(path=str(artifacts / "spec-card-confirmed-completed.png"), full_page=True)


def test_no_decision_in_time_parks_the_task_and_resume_completes_it(
    page: Page, short_review_server, artifacts
):
    log_in(page, short_review_server)
    task = send(page, GOAL)
    card = task.locator(".spec-card").first
    expect(card).to_be_visible(timeout=TASK_MS)
    expect(task.locator("[data-role=status]")).to_have_text(
        "Parked: confirm the spec to go on", timeout=TASK_MS
    )
    expect(card.locator("[data-role=spec-decision]")).to_contain_text("parked")
    expect(card.get_by_role("button", name="Confirm")).to_have_count(0)
    task_id = task.get_attribute("data-task-id")

    page.reload()  # later: the parked spec is listed in the sidebar with Resume
    parked = page.locator(f'#parked-specs li[data-task-id="{task_id}"]')
    expect(parked).to_be_visible()
    page.screenshot(path=str(artifacts / "spec-parked.png"), full_page=True)
    parked.get_by_role("button", name="Resume").click()

    task = page.locator(f'article.task[data-task-id="{task_id}"]')
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    expect(task.locator(".spec-card")).to_have_count(1)  # continued from the stored spec
    expect(page.locator("#parked-specs")).to_be_hidden()
    page.screenshot(path=str(artifacts / "spec-resumed-completed.png"), full_page=True)
