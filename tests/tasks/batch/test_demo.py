"""The example suite from a fresh clone (migrate, bootstrap, `run_tasks examples/suite.yaml
--concurrency 4`) and through `make demo`: offline, every task ending as the suite expects."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from tests.support import ROOT, server_env

pytestmark = pytest.mark.slow  # spawns processes: started early (tests/conftest.py)

SUITE_TASKS = {
    "react-fix-slug",
    "plan-verify-reflect",
    "summarize-notes",
    "chat-question",
    "team-rollback",
}


def fresh_clone(target):
    """What a clone of this checkout holds: the tracked files and the new ones git would commit
    (not .venv, var/ or other ignored files)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def check_report(report: dict) -> None:
    tasks = {t["id"]: t for t in report["tasks"]}
    assert set(tasks) == SUITE_TASKS
    assert all(t["expectation_met"] for t in tasks.values()), tasks
    plan = tasks["plan-verify-reflect"]
    assert plan["verification"][0] is False and plan["verification"][-1] is True
    assert plan["reflections"] >= 1
    team = tasks["team-rollback"]  # the coder's phase failed and was rolled back
    assert team["status"] == "failed" and team["rollback"] == "completed"
    assert team["error"]["error_code"] == "phase_failed"


def test_the_example_suite_runs_offline_from_a_fresh_clone_as_expected(tmp_path):
    clone = tmp_path / "agentkit"
    clone.mkdir()
    fresh_clone(clone)
    assert not (clone / "var").exists()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "AGENTKIT_VAR_DIR", "AGENTKIT_CONFIG", "REDIS_URL"}
        and not k.startswith("DJANGO_")
    }

    def manage(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=clone, env=env, capture_output=True, text=True, timeout=400,
        )  # fmt: skip

    for args in (("migrate", "--noinput", "-v", "0"), ("bootstrap",)):
        assert manage(*args).returncode == 0
    done = manage(
        "run_tasks", "examples/suite.yaml", "--concurrency", "4", "--report", "report.json"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    check_report(json.loads((clone / "report.json").read_text()))
    assert "expected outcomes 5/5" in done.stdout
    # plan_exec's and team_collab's spec reviews were confirmed by the batch (--review auto), in
    # the admin's name.
    with sqlite3.connect(clone / "var" / "db.sqlite3") as db:
        reviews = db.execute(
            "SELECT r.decision, u.username FROM specs_specreview r "
            "JOIN auth_user u ON u.id = r.user_id"
        ).fetchall()
    assert reviews == [("confirmed", "admin"), ("confirmed", "admin")]


def test_make_demo_runs_the_example_suite_and_writes_its_report(tmp_path):
    env = server_env(tmp_path)
    env.pop("DJANGO_SUPERUSER_PASSWORD")
    done = subprocess.run(
        ["make", "demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stdout + done.stderr
    check_report(json.loads((tmp_path / "var" / "demo-report.json").read_text()))
