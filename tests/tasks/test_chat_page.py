"""The chat page offers only what runs."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from apps.tasks import runner
from apps.tasks.services import KNOWN_MODES, RUNNABLE_MODES
from tests.tasks.factories import make_user, make_workspace

pytestmark = pytest.mark.django_db


def offered_modes(html: str) -> list[str]:
    select = re.search(r'<select id="mode">(.*?)</select>', html, re.S)
    assert select, "the chat page has no mode selector"
    return re.findall(r'<option value="([^"]*)"', select.group(1))


def test_mode_selector_offers_exactly_the_modes_that_run(tmp_path):
    user = make_user("alice")
    make_workspace("alpha", tmp_path, user)
    client = Client()
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    assert offered_modes(response.content.decode()) == list(RUNNABLE_MODES)


def test_runnable_modes_are_the_modes_the_runner_runs():
    # When a mode starts to run (runner.ENGINE_MODES), it must be offered (RUNNABLE_MODES), and
    # a mode the runner refuses with mode_not_available must not be offered.
    assert set(RUNNABLE_MODES) == set(runner.ENGINE_MODES)
    assert set(RUNNABLE_MODES) <= set(KNOWN_MODES)
