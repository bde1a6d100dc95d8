"""The evolution dashboard in admin draws its "over time" figures as the same SVG charts,
still scoped to the workspaces the staff member may see."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from apps.evolution.models import Pitfall, PitfallInjection
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db

SVG = "{http://www.w3.org/2000/svg}"


def test_evolution_dashboard_charts_new_pitfalls_and_injections_of_visible_workspaces(tmp_path):
    mine = make_workspace("alpha", tmp_path / "a")
    theirs = make_workspace("beta", tmp_path / "b")
    staff = make_user("sam")
    staff.is_staff = True
    staff.save()
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="evolution"))
    mine.members.add(staff)
    for workspace, status in [(mine, "active"), (mine, "candidate"), (theirs, "active")]:
        pitfall = Pitfall.objects.create(
            workspace=workspace,
            category="loop",
            trigger="t",
            advice="a",
            severity="high",
            status=status,
        )
        task = make_task(staff, workspace, status="completed")
        PitfallInjection.objects.create(pitfall=pitfall, task=task, outcome="completed")
    client = Client()
    client.force_login(staff)

    html = client.get("/admin/evolution/pitfall/dashboard/").content.decode()

    charts = {}
    for svg in re.findall(r"<svg [^>]*class=\"chart\".*?</svg>", html, flags=re.S):
        root = ET.fromstring(svg)
        charts[root.get("id")] = root
    new = charts["chart-new-pitfalls"].findall(f".//{SVG}rect[@class='bar']")
    assert {b.get("data-series"): b.get("data-value") for b in new} == {
        "active now": "1",
        "candidate or retired": "1",
    }
    injected = charts["chart-pitfalls"].findall(f".//{SVG}rect[@class='bar']")
    assert [(b.get("data-series"), b.get("data-value")) for b in injected] == [
        ("task completed", "2")
    ]
    assert 'id="by-day"' in html  # the table stays, for exact figures
