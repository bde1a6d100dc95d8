"""The chat's "Thinking" section: the model's reasoning, collapsed, above the step's answer."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.e2e

THOUGHT = "The user greets me; a short greeting back is enough."


@pytest.fixture(scope="module")
def thinking_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("thinking")
    (tmp / "thinking.yaml").write_text(
        f'- {{thinking: "{THOUGHT}", text: "Hello there!", repeat: true}}\n'
    )
    shipped = (ROOT / "agentkit.yaml").read_text()
    line = "    # script: my_script.yaml"
    assert line in shipped
    config = tmp / "agentkit.yaml"
    config.write_text(shipped.replace(line, "    script: thinking.yaml  #"))
    with agentkit_server(tmp, AGENTKIT_CONFIG=str(config)) as server:
        yield server


def test_reasoning_is_a_collapsed_thinking_section_above_the_answer(
    page: Page, thinking_server, artifacts
):
    log_in(page, thinking_server)
    page.locator("#message").fill("@chat hello")
    page.get_by_role("button", name="Send").click()
    task = page.locator("article.task").first
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    card = task.locator(".thinking-card")
    expect(card).to_have_count(1)
    expect(card.locator("summary")).to_have_text("Thinking")
    text = card.locator(".thinking-text")
    expect(text).to_be_hidden()  # collapsed until clicked
    answer = task.locator(".bubble.assistant", has_text="Hello there!")
    expect(answer).to_have_count(1)
    expect(answer).not_to_contain_text("greets")  # the reasoning is not part of the answer
    card.locator("summary").click()
    expect(text).to_have_text(THOUGHT)
    page.screenshot(path=str(artifacts / "chat-thinking.png"), full_page=True)
    # A reload replays the stored events: the section comes back the same.
    page.reload()
    task = page.locator("article.task").first
    expect(task.locator(".thinking-card")).to_have_count(1)
