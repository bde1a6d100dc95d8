"""The chat page offers only what runs."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from apps.tasks.routing import KNOWN_MODES, RUNNABLE_MODES
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


def test_the_selector_offers_plan_exec_and_team_collab(tmp_path):
    # both run (tests/tasks/test_plan_exec_runner.py, tests/tasks/test_team_runner.py)
    user = make_user("bob")
    make_workspace("beta", tmp_path, user)
    client = Client()
    client.force_login(user)
    offered = offered_modes(client.get("/").content.decode())
    assert "plan_exec" in offered
    assert "team_collab" in offered
    assert set(offered) <= set(KNOWN_MODES)
