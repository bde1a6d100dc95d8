"""Browser tests: Playwright driving Debian's Chromium against a real Daphne server.

They run in their own pytest process (`make test` does this): sync Playwright cannot share an
event loop with the async tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import ROOT, agentkit_server

CHROMIUM = os.environ.get("AGENTKIT_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"

pytestmark = pytest.mark.e2e


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
