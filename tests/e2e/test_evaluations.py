"""Issue 28's Evaluations page in a real browser: a tiny evaluation (`run_tasks --suite
humaneval --limit 2 --compare react,plan_exec --model oracle`, a real subprocess on the live
server's database) prints its page's path; the admin it ran as finds the run from the dashboard,
its per-mode charts and its per-task table, and a mark of the table opens that task in the chat."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_login import log_in
from tests.support import ROOT

pytestmark = pytest.mark.e2e

RUN_TIMEOUT = 300  # seconds: four oracle tasks take a few seconds on an idle machine


def test_a_tiny_evaluation_shows_its_charts_and_table(page: Page, server, artifacts):
    done = subprocess.run(
        [sys.executable, "manage.py", "run_tasks", "--suite", "humaneval", "--limit", "2",
         "--compare", "react,plan_exec", "--model", "oracle", "--concurrency", "4"],
        cwd=ROOT, env=server.env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    path = re.search(r"^evaluation page: (/evaluations/\d+/)$", done.stdout, re.M).group(1)

    log_in(page, server)  # the admin: the suite ran as the bootstrap admin
    page.goto(f"{server.url}/dashboard/")
    page.get_by_role("link", name="Evaluations").click()
    expect(page).to_have_url(f"{server.url}/evaluations/")
    runs = page.locator("#evaluation-runs tbody tr")
    expect(runs.first).to_contain_text("react 2/2 (100.0 %) · plan_exec 2/2 (100.0 %)")
    expect(runs.first).to_contain_text("oracle")
    page.screenshot(path=str(artifacts / "evaluations.png"), full_page=True)
    runs.first.get_by_role("link").click()
    expect(page).to_have_url(f"{server.url}{path}")
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"Evaluation #\d+"))

    solved = page.locator("#card-chart-eval-solved svg#chart-eval-solved rect.bar")
    expect(solved).to_have_count(2)  # one "solved" bar per mode, nothing unsolved
    values = solved.evaluate_all(
        "bars => bars.map(b => [b.dataset.category, b.dataset.series, b.dataset.value])"
    )
    assert sorted(values) == [["plan_exec", "solved", "1.0"], ["react", "solved", "1.0"]]
    # the reference models have no price: the cost chart says so instead of drawing $0 bars
    expect(page.locator("svg#chart-eval-cost text.empty")).to_contain_text("No cost to show")

    table = page.locator("#evaluation-tasks")
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table.locator("thead")).to_contain_text("react")
    expect(table.locator("thead")).to_contain_text("plan_exec")
    marks = table.locator("a.outcome.solved")
    expect(marks).to_have_count(4)  # 2 problems × 2 modes, each solved
    page.screenshot(path=str(artifacts / "evaluation.png"), full_page=True)

    href = marks.first.get_attribute("href")
    task_id = re.fullmatch(r"/#task-(\d+)", href).group(1)
    marks.first.click()
    # the chat opens that task; once loaded, the URL names its conversation too (?c=N)
    expect(page).to_have_url(re.compile(rf"^{re.escape(server.url)}/(\?c=\d+)?#task-{task_id}$"))
    expect(page.locator(f'article.task[data-task-id="{task_id}"]')).to_be_visible()
