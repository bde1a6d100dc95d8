"""Issue 17's acceptance in a real browser: `manage.py run_tasks examples/suite.yaml
--concurrency 4` (a real subprocess, offline scripted model, on the live server's database) ends
every task as the suite expects, then the dashboard, opened from the chat by the user the batch
ran as (the bootstrap admin), charts those five tasks."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_login import log_in
from tests.support import ROOT
from tests.tasks.batch.test_demo import SUITE_TASKS, check_report

pytestmark = pytest.mark.e2e

RUN_TIMEOUT = 400  # seconds: generous, the suite takes well under a minute on an idle machine


def _bars(page: Page, chart: str) -> list[dict[str, str]]:
    """Every bar of a chart: its series, category and value (from the SVG's data attributes)."""
    return page.locator(f"svg#{chart} rect.bar").evaluate_all(
        "bars => bars.map(b => ({series: b.dataset.series, category: b.dataset.category,"
        " value: b.dataset.value}))"
    )


def _totals(bars: list[dict[str, str]]) -> dict[str, float]:
    """Value per series, summed over the categories (the days, should the run span midnight)."""
    totals: dict[str, float] = {}
    for bar in bars:
        totals[bar["series"]] = totals.get(bar["series"], 0) + float(bar["value"])
    return totals


def test_run_tasks_example_suite_then_the_dashboard_charts_its_tasks(
    page: Page, server, artifacts, tmp_path
):
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "manage.py", "run_tasks", "examples/suite.yaml", "--concurrency", "4",
         "--report", str(out)],
        cwd=ROOT, env=server.env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "expected outcomes 5/5" in done.stdout, done.stdout
    report = json.loads(out.read_text())
    check_report(report)
    assert report["summary"]["expectations"] == {"checked": 5, "met": 5}
    assert report["concurrency"] == 4
    task_ids = {f"#{t['task_id']}" for t in report["tasks"]}
    assert len(task_ids) == len(SUITE_TASKS)

    log_in(page, server)  # the admin: the batch ran as the bootstrap admin (run_tasks --user)
    page.get_by_role("link", name="Dashboard").click()
    expect(page).to_have_url(f"{server.url}/dashboard/")
    expect(page.get_by_role("heading", name="Dashboard", level=1)).to_be_visible()
    # A fresh server: the suite's five tasks are all the dashboard has (four completed; the team
    # task failed with its rollback); three of them ran verification (plan_exec passed after a
    # reflection, the react task that edited the demo verified its change, team_collab never
    # passed).
    expect(page.locator("#dashboard-summary")).to_contain_text(
        re.compile(r"5 tasks in the last \d+ days, 4 completed\.")
    )
    expect(page.locator("#dashboard-summary")).to_contain_text(
        "Verification passed in the end for 67% of the 3 verified tasks."
    )
    for chart in ("outcomes", "tokens", "cost", "cache", "verification", "pitfalls"):
        expect(page.locator(f"#card-{chart} svg#chart-{chart}")).to_be_visible()

    expect(page.locator("svg#chart-outcomes rect.bar").first).to_be_visible()
    assert _totals(_bars(page, "chart-outcomes")) == {"completed": 4, "failed": 1}

    # tokens per task: one bar per batch task (every one of them called the model)
    tokens = _bars(page, "chart-tokens")
    assert {bar["category"] for bar in tokens} == task_ids
    assert {bar["category"] for bar in tokens if bar["series"] == "output"} == task_ids
    assert sum(float(b["value"]) for b in tokens if b["series"] == "output") == sum(
        t["output_tokens"] for t in report["tasks"]
    )

    expect(page.locator("svg#chart-cache circle.point").first).to_be_visible()

    assert _totals(_bars(page, "chart-verification")) == {
        "passed first try": 1,  # the react task's change, verified (react_when_changed)
        "passed after reflection": 1,
        "never passed": 1,
    }
    page.screenshot(path=str(artifacts / "dashboard-batch.png"), full_page=True)
