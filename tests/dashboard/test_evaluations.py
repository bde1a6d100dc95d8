"""The Evaluations pages: each stored `run_tasks --suite` run (apps/tasks/batch/records.py) in a
list newest first, and one run with its per-mode charts and per-task table; signed-in users
only, and only the runs that ran as them."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.test import Client

from apps.dashboard.evaluations import evaluation_runs
from apps.tasks.batch.evaluation import Evaluation, mode_summary
from apps.tasks.batch.outcomes import Outcome
from apps.tasks.batch.records import evaluation_run_record
from apps.tasks.batch.running import BatchOptions, BatchRun
from apps.tasks.batch.spec import Suite
from apps.tasks.models import EvaluationRun
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db

START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def svgs(html: str) -> dict[str, ET.Element]:
    return {
        (root := ET.fromstring(svg)).get("id"): root
        for svg in re.findall(r"<svg .*?</svg>", html, flags=re.S)
    }


def bars(svg: ET.Element) -> dict[tuple[str, str], float]:
    """(category, series) → value of each bar."""
    return {
        (bar.get("data-category"), bar.get("data-series")): float(bar.get("data-value"))
        for bar in svg.iter("{http://www.w3.org/2000/svg}rect")
        if bar.get("class") == "bar"
    }


def batch(mode: str, outcomes: list[Outcome], *, start=START, interrupted=False) -> BatchRun:
    return BatchRun(
        Suite(Path("humaneval")),
        f"batch-{mode}",
        BatchOptions(workspaces_dir=Path("/nonexistent")),
        started_at=start,
        outcomes=outcomes,
        finished_at=start + timedelta(seconds=42),
        wall_seconds=42.0,
        interrupted=interrupted,
    )


def outcome(task_id, problem: str, mode: str, solved: bool, cost: float) -> Outcome:
    return Outcome(
        id=problem,
        status="completed" if task_id else "not_started",
        task_id=task_id,
        mode=mode,
        model="oracle",
        cost=cost,
        input_tokens=100,
        output_tokens=20,
        hidden_tests="passed" if solved else ("failed" if task_id else "not_run"),
        solved=solved,
        answer="a long answer the page never shows",
        detail="" if solved else "AssertionError",
    )


@pytest.fixture
def alice_run(tmp_path):
    """react solves 1 of 2 for $0.02, plan_exec 2 of 2 for $0.06; HumanEval-1 never started in
    react (the run was stopped)."""
    alice = make_user("alice")
    workspace = make_workspace("alpha", tmp_path, alice)
    t = [make_task(alice, workspace, goal=f"problem {i}").pk for i in range(3)]
    ev = Evaluation(suite="humaneval", modes=["react", "plan_exec"])
    ev.runs.append(("react", 1, batch("react", [
        outcome(t[0], "HumanEval-0", "react", True, 0.02),
        outcome(None, "HumanEval-1", "react", False, 0.0),
    ], interrupted=True)))  # fmt: skip
    ev.runs.append(("plan_exec", 1, batch("plan_exec", [
        outcome(t[1], "HumanEval-0", "plan_exec", True, 0.03),
        outcome(t[2], "HumanEval-1", "plan_exec", True, 0.03),
    ], start=START + timedelta(minutes=1))))  # fmt: skip
    return alice, ev, evaluation_run_record(ev=ev, user=alice, model="oracle"), t


def test_a_finished_evaluation_is_stored_with_its_summary_and_rows(alice_run):
    alice, ev, run, task_ids = alice_run
    run = EvaluationRun.objects.get(pk=run.pk)
    assert (run.user, run.suite, run.modes, run.model, run.repeat) == (
        alice, "humaneval", ["react", "plan_exec"], "oracle", 1,
    )  # fmt: skip
    assert run.interrupted is True  # react's batch was stopped by Ctrl-C
    assert run.started_at == START
    assert run.finished_at == START + timedelta(minutes=1, seconds=42)
    assert run.summary == {mode: mode_summary(ev, mode) for mode in ev.modes}
    assert run.summary["plan_exec"]["solved"] == 2 and run.summary["react"]["solved"] == 1
    assert [(r["id"], r["mode"], r["task_id"], r["solved"]) for r in run.outcomes] == [
        ("HumanEval-0", "react", task_ids[0], True),
        ("HumanEval-1", "react", None, False),
        ("HumanEval-0", "plan_exec", task_ids[1], True),
        ("HumanEval-1", "plan_exec", task_ids[2], True),
    ]
    assert "answer" not in run.outcomes[0]  # the answers stay in the Task rows


def test_without_a_model_alias_the_run_names_the_models_its_tasks_ran_on(alice_run):
    alice, ev, _, _ = alice_run
    assert evaluation_run_record(ev=ev, user=alice).model == "oracle"


def test_anonymous_visitor_is_sent_to_log_in(alice_run):
    _, _, run, _ = alice_run
    for path in ("/evaluations/", f"/evaluations/{run.pk}/"):
        response = Client().get(path)
        assert response.status_code == 302
        assert response["Location"].startswith(f"/accounts/login/?next={path}")


def test_the_dashboard_links_to_the_evaluations(alice_run):
    alice, *_ = alice_run
    html = signed_in(alice).get("/dashboard/").content.decode()
    assert re.search(r'<a href="/evaluations/" id="evaluations-link">Evaluations</a>', html)


def test_runs_are_listed_newest_first_and_only_to_the_user_they_ran_as(alice_run):
    alice, ev, older, _ = alice_run
    newer = evaluation_run_record(ev=ev, user=alice)
    EvaluationRun.objects.filter(pk=newer.pk).update(started_at=START + timedelta(days=1))
    bob = make_user("bob")
    bobs = evaluation_run_record(ev=ev, user=bob)
    assert list(evaluation_runs(user=alice)) == [newer, older]

    html = signed_in(alice).get("/evaluations/").content.decode()
    links = re.findall(r'<a href="/evaluations/(\d+)/">#\d+</a>', html)
    assert links == [str(newer.pk), str(older.pk)]
    assert "react 1/2 (50.0 %) · plan_exec 2/2 (100.0 %)" in html
    assert '<span class="badge">interrupted</span>' in html
    assert signed_in(alice).get(f"/evaluations/{bobs.pk}/").status_code == 404
    assert signed_in(bob).get(f"/evaluations/{older.pk}/").status_code == 404
    assert (
        "No evaluation yet" in signed_in(make_user("carol")).get("/evaluations/").content.decode()
    )


def test_the_run_page_charts_solved_share_and_cost_per_solved_task_per_mode(alice_run):
    alice, _, run, _ = alice_run
    response = signed_in(alice).get(f"/evaluations/{run.pk}/")
    assert response.status_code == 200
    charts = svgs(response.content.decode())
    assert bars(charts["chart-eval-solved"]) == {
        ("react", "solved"): 0.5,
        ("react", "not solved"): 0.5,
        ("plan_exec", "solved"): 1.0,
    }
    cost = bars(charts["chart-eval-cost"])
    assert cost == {
        ("react", "cost per solved task"): pytest.approx(0.02),
        ("plan_exec", "cost per solved task"): pytest.approx(0.03),
    }


def test_a_run_without_cost_says_so_instead_of_drawing_bars(alice_run):
    alice, *_ = alice_run
    free = Evaluation(suite="humaneval", modes=["react"])
    free.runs.append(
        ("react", 1, batch("react", [outcome(None, "HumanEval-0", "react", False, 0)]))
    )
    run = evaluation_run_record(ev=free, user=alice)
    html = signed_in(alice).get(f"/evaluations/{run.pk}/").content.decode()
    charts = svgs(html)
    assert not bars(charts["chart-eval-cost"])
    assert "No cost to show" in ET.tostring(charts["chart-eval-cost"], encoding="unicode")
    assert bars(charts["chart-eval-solved"]) == {("react", "not solved"): 1.0}


def test_the_per_task_table_links_each_modes_outcome_to_its_task(alice_run):
    alice, _, run, task_ids = alice_run
    html = signed_in(alice).get(f"/evaluations/{run.pk}/").content.decode()
    table = re.search(r'<table class="eval-table" id="evaluation-tasks">.*?</table>', html, re.S)
    rows = re.findall(r"<tr>\s*<th scope=\"row\">(.*?)</th>(.*?)</tr>", table.group(0), re.S)
    cells = {task: re.findall(r"<td>(.*?)</td>", rest, re.S) for task, rest in rows}
    assert list(cells) == ["HumanEval-0", "HumanEval-1"]
    react_0, plan_0 = cells["HumanEval-0"]
    assert f'href="/#task-{task_ids[0]}"' in react_0 and ">✓</a>" in react_0
    assert f'href="/#task-{task_ids[1]}"' in plan_0
    react_1, plan_1 = cells["HumanEval-1"]
    assert "href" not in react_1 and "not_started" in react_1  # never started: no task to open
    assert f'href="/#task-{task_ids[2]}"' in plan_1
    # the summary table as run_tasks prints it
    assert re.search(r"<th scope=\"row\">react</th>\s*<td class=\"num\">1/2 \(50.0 %\)", html)
