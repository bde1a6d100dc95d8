"""Verification judges what the task changed, through `run_tasks` and the chat's runner: lint
the workspace had before the task does not fail it; lint the task adds does."""

from __future__ import annotations

import json
from pathlib import Path

PRELINT = Path(__file__).parent / "workspaces" / "prelint"


def run(batch_env, model: str) -> tuple[dict, list[dict]]:
    suite = batch_env.suite(
        f"{model}.yaml",
        f"""
        tasks:
          - id: {model}
            mode: plan_exec
            model: {model}
            source: {PRELINT}
            goal: fix add in calc.py so that test_calc.py passes
        """,
    )
    report = batch_env.tmp / f"{model}.json"
    done = batch_env.run_tasks(str(suite), "--report", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = json.loads(report.read_text())["tasks"]
    results = [
        json.loads(data)
        for (data,) in batch_env.query(
            "SELECT data FROM tasks_taskevent WHERE task_id = ? AND type = "
            "'verification_result' ORDER BY seq",
            row["task_id"],
        )
    ]
    return row, results


def test_lint_the_workspace_had_before_does_not_fail_a_correct_fix(batch_env):
    row, results = run(batch_env, "lint_fix")
    assert row["status"] == "completed", row
    assert row["verification"] == [True]  # the first verification passed
    assert row["model"] == "lint_fix"  # the report names the model the task ran on
    summary = results[0]["summary"]
    assert (
        "ruff check: passed (" in summary and "the workspace had before the task ignored" in summary
    )
    # the old findings are still there: the task was not asked to touch helpers.py
    assert "def collect(item, into=[]):" in (PRELINT / "helpers.py").read_text()


def test_lint_the_task_adds_still_fails_verification(batch_env):
    row, results = run(batch_env, "lint_adds")
    assert row["verification"] == [False, True], row  # failed on F401, passed once removed
    first = "\n".join(results[0]["errors"])
    assert "calc.py:3:8: F401" in first
    assert "helpers.py" not in first and "B006" not in first and "I001" not in first
    assert row["status"] == "completed"
