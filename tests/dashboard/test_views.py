"""The dashboard page: linked from the chat, signed-in users only, their workspaces only,
charts inlined as SVG, bad filters refused with a message."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from django.test import Client

from apps.tasks.models import TaskEvent
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db

SVG = "{http://www.w3.org/2000/svg}"
CHART_IDS = [
    "chart-outcomes",
    "chart-tokens",
    "chart-cost",
    "chart-cache",
    "chart-verification",
    "chart-pitfalls",
]


def svgs(html: str) -> dict[str, ET.Element]:
    charts = {}
    for svg in re.findall(r"<svg .*?</svg>", html, flags=re.S):
        root = ET.fromstring(svg)
        charts[root.get("id")] = root
    return charts


@pytest.fixture
def two_users(tmp_path):
    alice, bob = make_user("alice"), make_user("bob")
    mine = make_workspace("alpha", tmp_path / "a", alice)
    theirs = make_workspace("beta", tmp_path / "b", bob)
    return alice, mine, bob, theirs


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_anonymous_visitor_is_sent_to_log_in():
    response = Client().get("/dashboard/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/dashboard/")


def test_chat_page_links_to_the_dashboard(two_users):
    alice, *_ = two_users
    html = signed_in(alice).get("/").content.decode()
    assert re.search(r'<a href="/dashboard/" id="dashboard-link"[^>]*>Dashboard</a>', html)


def test_dashboard_shows_six_svg_charts_of_the_users_tasks(two_users):
    alice, mine, bob, theirs = two_users
    task = make_task(
        alice,
        mine,
        goal="<script>alert('goal')</script>",
        mode="plan_exec",
        status="completed",
        usage={"input_tokens": 1200, "cache_read_tokens": 1000, "output_tokens": 40},
        cost=0.5,
    )
    TaskEvent.objects.create(
        task=task,
        seq=1,
        type="verification_result",
        data={"attempt": 1, "passed": True},
        ts=task.created_at,
    )
    make_task(bob, theirs, goal="bob's private goal", status="failed", usage={"input_tokens": 7})

    response = signed_in(alice).get("/dashboard/")

    assert response.status_code == 200
    html = response.content.decode()
    charts = svgs(html)
    assert sorted(charts) == sorted(CHART_IDS)
    outcome_bars = charts["chart-outcomes"].findall(f".//{SVG}rect[@class='bar']")
    assert [(b.get("data-series"), b.get("data-value")) for b in outcome_bars] == [
        ("completed", "1")
    ]
    token_bars = charts["chart-tokens"].findall(f".//{SVG}rect[@class='bar']")
    assert {b.get("data-series"): b.get("data-value") for b in token_bars} == {
        "cached prompt": "1000",
        "uncached prompt": "200",
        "output": "40",
    }
    title = token_bars[0].find(f"{SVG}title").text
    assert "<script>alert('goal')</script>" in title  # shown as text...
    assert "<script>" not in html  # ...never as markup
    (point,) = charts["chart-cache"].findall(f".//{SVG}circle[@class='point']")
    assert point.find(f"{SVG}title").text.endswith("cache hit rate: 83%")
    verified = charts["chart-verification"].findall(f".//{SVG}rect[@class='bar']")
    assert [b.get("data-series") for b in verified] == ["passed first try"]
    assert (
        verified[0]
        .find(f"{SVG}title")
        .text.endswith(" — 1 of 1 passed (100%) · passed first try: 1")
    )
    assert charts["chart-pitfalls"].find(f"{SVG}text[@class='empty']") is not None
    assert "bob" not in html and "beta" not in html


def test_a_user_without_tasks_sees_no_tasks_yet(two_users):
    alice, *_ = two_users
    charts = svgs(signed_in(alice).get("/dashboard/").content.decode())
    assert charts["chart-outcomes"].find(f"{SVG}text[@class='empty']").text == "No tasks yet."
    assert not charts["chart-outcomes"].findall(f".//{SVG}rect[@class='bar']")


def test_filters_keep_one_workspace_and_a_period(two_users, tmp_path):
    alice, mine, *_ = two_users
    other = make_workspace("gamma", tmp_path / "g", alice)
    make_task(alice, mine, status="completed")
    make_task(alice, other, status="failed")
    response = signed_in(alice).get("/dashboard/", {"workspace": other.pk, "days": 7})
    assert response.status_code == 200
    bars = svgs(response.content.decode())["chart-outcomes"].findall(f".//{SVG}rect[@class='bar']")
    assert [b.get("data-series") for b in bars] == ["failed"]
    assert len(response.context["data"].days) == 7


def test_another_users_workspace_is_refused_like_an_unknown_one(two_users):
    alice, _, bob, theirs = two_users
    make_task(bob, theirs, goal="bob's private goal", status="failed")
    client = signed_in(alice)
    for params in ({"workspace": theirs.pk}, {"workspace": 999_999}, {"days": 3}):
        response = client.get("/dashboard/", params)
        assert response.status_code == 400
        html = response.content.decode()
        assert "Select a valid choice" in html and "Pick one from the list" in html
        assert "bob's private goal" not in html and "<svg" not in html
