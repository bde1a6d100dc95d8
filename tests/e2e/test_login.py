from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.e2e


def log_in(page: Page, server, password: str | None = None) -> None:
    page.goto(f"{server.url}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.get_by_label("Username").fill(server.username)
    page.get_by_label("Password").fill(password or server.password)
    # the page it lands on has loaded, its (deferred) scripts have run: a form used before then
    # would go out as a plain GET, a message box would have no socket
    with page.expect_navigation():
        page.get_by_role("button", name="Log in").click()


def test_login_lands_on_the_chat_page(page: Page, server, artifacts):
    log_in(page, server)
    expect(page).to_have_url(f"{server.url}/")
    expect(page.get_by_role("heading", name="Conversations")).to_be_visible()
    expect(page.locator("#workspace")).to_contain_text("demo")
    expect(page.locator("#offline-banner")).to_contain_text("offline")
    # the app serves its own static files (no DEBUG, no proxy)
    assert page.request.get(f"{server.url}/static/agentkit.css").ok
    assert page.request.get(f"{server.url}/static/admin/css/base.css").ok
    page.screenshot(path=str(artifacts / "login-chat-page.png"), full_page=True)


def test_wrong_password_shows_an_error_and_stays_on_login(page: Page, server, artifacts):
    log_in(page, server, password="not-the-password")
    expect(page.get_by_role("alert")).to_contain_text("didn't match")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.screenshot(path=str(artifacts / "login-wrong-password.png"))
