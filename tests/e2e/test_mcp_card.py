"""The chat's tool card of an MCP tool says which server it came from (real Daphne, a real
`mcp-server-time` over stdio, the scripted model calling it)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.support import VENV_BIN, agentkit_server

pytestmark = pytest.mark.e2e

SCRIPT = """\
- text: "Asking the clock."
  tool_calls: [{name: time__get_current_time, arguments: {timezone: UTC}}]
- "The time server answered."
"""


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mcp-card")
    (tmp / "script.yaml").write_text(SCRIPT)
    config = tmp / "agentkit.yaml"
    config.write_text(
        "models: {main: {provider: scripted, script: script.yaml}}\n"
        'sandbox: {mode: "off"}\n'
        "mcp_servers:\n"
        f"  time: {{command: {VENV_BIN / 'mcp-server-time'}, args: [--local-timezone, UTC]}}\n"
    )
    with agentkit_server(tmp, AGENTKIT_CONFIG=str(config)) as server:
        yield server


def test_an_mcp_tool_card_names_its_server(page: Page, mcp_server, artifacts):
    log_in(page, mcp_server)
    page.locator("#message").fill("what time is it in UTC?")
    page.get_by_role("button", name="Send").click()
    card = page.locator('.tool-card[data-tool="time__get_current_time"]')
    expect(card).to_be_visible(timeout=TASK_MS)
    expect(card.locator("[data-role=tool-what]")).to_contain_text("MCP time · get_current_time")
    expect(card.locator(".tool-state")).to_have_text("done", timeout=TASK_MS)
    page.screenshot(path=str(artifacts / "chat-mcp-card.png"), full_page=True)
