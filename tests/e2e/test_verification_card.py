"""The chat's verification card: commands, pass/fail and a collapsible log."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def verifying_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verify")
    shipped = (ROOT / "agentkit.yaml").read_text()
    config = tmp / "agentkit.yaml"
    config.write_text(
        shipped.replace(
            "modes: {direct_chat: false, react: false,", "modes: {direct_chat: false, react: true,"
        )
    )
    assert "react: true" in config.read_text()
    with agentkit_server(tmp, AGENTKIT_CONFIG=str(config)) as server:
        yield server


def test_verification_card_shows_commands_result_and_log(page: Page, verifying_server, artifacts):
    log_in(page, verifying_server)
    page.locator("#message").fill("fix the failing test in tests/test_slug.py")
    page.get_by_role("button", name="Send").click()
    task = page.locator("article.task").first
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    card = task.locator(".verify-card")
    expect(card).to_have_count(1)
    expect(card).to_have_class("verify-card ok")
    expect(card.locator("summary")).to_contain_text("Verification passed")
    expect(card.locator("summary")).to_contain_text("pytest -x -q")
    expect(card.locator("summary")).to_contain_text("ruff check")
    # the answer was streamed before verification: it is shown once, not again after the card
    expect(task.locator(".bubble.assistant", has_text="Fixed slugify")).to_have_count(1)
    log = card.locator(".result")
    expect(log).to_be_hidden()  # collapsed until clicked
    card.locator("summary").click()
    expect(log).to_contain_text("passed")
    assert log.inner_text().startswith("$ pytest")
    page.screenshot(path=str(artifacts / "chat-verification-card.png"), full_page=True)
