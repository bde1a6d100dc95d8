"""Browser tests: Playwright driving Debian's Chromium against a real Daphne server.

They run in their own pytest process (`make test` does this): sync Playwright cannot share an
event loop with the async tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.bounds import ACTION_MS, EXPECT_MS
from tests.support import ROOT, agentkit_server

CHROMIUM = os.environ.get("AGENTKIT_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"

pytestmark = pytest.mark.e2e

# Bounds for what never comes (tests/e2e/bounds.py), in one place: every `expect` waits this long
# unless it names its own bound.
expect.set_options(timeout=EXPECT_MS)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"browser tests need Chromium at {CHROMIUM}: run 'make test' as root (it installs "
            "Debian's chromium) or 'sudo apt-get install chromium'"
        )
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    }


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with agentkit_server(tmp_path_factory.mktemp("e2e")) as running:
        yield running


@pytest.fixture
def page(page):
    """pytest-playwright's page, with the bound for clicks, fills and navigations raised: the tier
    runs beside the unit tier's workers on a busy machine."""
    page.set_default_timeout(ACTION_MS)
    page.set_default_navigation_timeout(ACTION_MS)
    return page
