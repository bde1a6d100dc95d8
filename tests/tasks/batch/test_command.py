"""`manage.py run_tasks` as a user runs it: a subprocess on a private database, the scripted
model, real workspaces and the chat's runner."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from datetime import datetime

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.slow  # spawns processes: started early (tests/conftest.py)

DEMO = ROOT / "demo" / "workspace"
BLURB = ROOT / "examples" / "workspaces" / "blurb"


def test_suite_runs_through_the_command_and_its_report_matches_expected_outcomes(batch_env):
    suite = batch_env.suite(
        "small.yaml",
        f"""
        tasks:
          - id: fix
            mode: react
            source: {DEMO}
            goal: fix the failing test in tests/test_slug.py
            expect: {{status: completed, answer_contains: "[^a-zA-Z0-9]+"}}
          - id: ask
            mode: direct_chat
            goal: what are you?
            expect: {{status: completed, answer_contains: check_llm, verification: not_run}}
        """,
    )
    report, junit = batch_env.tmp / "small.json", batch_env.tmp / "small.xml"
    done = batch_env.run_tasks(str(suite), "--report", str(report), "--junit", str(junit))
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(report.read_text())
    tasks = {t["id"]: t for t in data["tasks"]}
    assert [t["id"] for t in data["tasks"]] == ["fix", "ask"]
    assert all(t["status"] == "completed" and t["expectation_met"] for t in data["tasks"])
    assert tasks["fix"]["steps"] >= 2 and tasks["fix"]["tokens"] > 0
    assert data["summary"]["expectations"] == {"checked": 2, "met": 2}
    # One Task row per run, owned by the bootstrap admin, each in its own fresh workspace.
    rows = batch_env.query(
        "SELECT t.id, t.status, u.username, w.root_dir FROM tasks_task t "
        "JOIN auth_user u ON u.id = t.user_id JOIN tasks_workspace w ON w.id = t.workspace_id "
        "WHERE t.id IN (?, ?)",
        tasks["fix"]["task_id"],
        tasks["ask"]["task_id"],
    )
    assert {(status, user) for _, status, user, _ in rows} == {("completed", "admin")}
    fixed = next(root for pk, _, _, root in rows if pk == tasks["fix"]["task_id"])
    assert "[^a-zA-Z0-9]+" in (ROOT / fixed / "textkit" / "slug.py").read_text()
    assert "[^a-zA-Z0-9]+" not in (DEMO / "textkit" / "slug.py").read_text()  # a copy was edited
    # The table names every task with its expected-outcome match; JUnit is valid XML.
    table = done.stdout[done.stdout.index("id  ") :]
    assert "fix " in table and "ask " in table and "expected outcomes 2/2" in table
    root = ET.parse(junit).getroot()
    [testsuite] = root.findall("testsuite")
    assert testsuite.get("tests") == "2" and testsuite.get("failures") == "0"
    assert [case.get("name") for case in testsuite.findall("testcase")] == ["fix", "ask"]


def test_an_outcome_that_differs_from_the_expected_one_fails_the_run_and_the_junit_case(batch_env):
    suite = batch_env.suite(
        "mismatch.jsonl",
        '{"id": "ask", "mode": "direct_chat", "goal": "hi", '
        '"expect": {"answer_contains": "no such words"}}\n',
    )
    junit = batch_env.tmp / "mismatch.xml"
    done = batch_env.run_tasks(str(suite), "--junit", str(junit))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "MISMATCH" in done.stdout
    assert "ask: the answer does not contain 'no such words'" in done.stdout
    [case] = ET.parse(junit).getroot().iter("testcase")
    assert "does not contain 'no such words'" in case.find("failure").get("message")


def test_a_team_phase_that_fails_is_rolled_back_and_the_report_checks_the_rollback(batch_env):
    # The same failing team task twice: one expects what happens (the coder's phase fails, its
    # rollback command removes the files it added), the other a rollback that failed.
    task = f"""
            mode: team_collab
            source: {BLURB}
            goal: add ellipsize(text, width) to blurb"""
    suite = batch_env.suite(
        "team.yaml",
        f"""
        tasks:
          - id: honest{task}
            expect: {{status: failed, error_code: phase_failed, rollback: completed}}
          - id: wrong{task}
            expect: {{rollback: failed, error_code: invalid_spec}}
        """,
    )
    report = batch_env.tmp / "team.json"
    done = batch_env.run_tasks(str(suite), "--report", str(report))
    assert done.returncode == 1, done.stdout + done.stderr
    tasks = {t["id"]: t for t in json.loads(report.read_text())["tasks"]}
    assert tasks["honest"]["expectation_met"] is True
    assert tasks["honest"]["rollback"] == "completed"
    assert tasks["wrong"]["mismatches"] == [
        "error code phase_failed, expected invalid_spec",
        "rollback completed, expected failed",
    ]
    [(pk, root)] = batch_env.query(
        "SELECT t.id, w.root_dir FROM tasks_task t JOIN tasks_workspace w "
        "ON w.id = t.workspace_id WHERE t.id = ?",
        tasks["honest"]["task_id"],
    )
    order = [
        kind
        for (kind,) in batch_env.query(
            "SELECT type FROM tasks_taskevent WHERE task_id = ? AND type LIKE 'phase_%' "
            "ORDER BY seq",
            pk,
        )
    ]
    assert order[-3:] == ["phase_failed", "phase_rollback_started", "phase_rollback_completed"]
    workspace = ROOT / root
    assert not (workspace / "blurb" / "ellipsize.py").exists()  # the phase's files are gone
    assert not (workspace / "tests" / "test_ellipsize.py").exists()
    assert (workspace / "blurb" / "words.py").read_text() == (
        BLURB / "blurb" / "words.py"
    ).read_text()


def test_an_invalid_file_runs_nothing_and_lists_every_error(batch_env):
    before = batch_env.query("SELECT COUNT(*) FROM tasks_task")[0][0]
    suite = batch_env.suite(
        "invalid.yaml",
        """
        tasks:
          - id: a
            goal: fine
          - id: b
            mode: nonsense
          - id: c
            goal: g
            source: ./nowhere
        """,
    )
    report = batch_env.tmp / "invalid.json"
    done = batch_env.run_tasks(str(suite), "--report", str(report))
    assert done.returncode == 2
    assert f"{suite}:5: task 'b': goal: Field required" in done.stderr
    assert f"{suite}:6: task 'b': mode: unknown mode 'nonsense'" in done.stderr
    assert f"{suite}:9: task 'c': source: source './nowhere' is not a directory" in done.stderr
    assert batch_env.query("SELECT COUNT(*) FROM tasks_task")[0][0] == before
    assert not report.exists()


def _max_overlap(tasks: list[dict]) -> int:
    points = []
    for task in tasks:
        points.append((datetime.fromisoformat(task["started_at"]), 1))
        points.append((datetime.fromisoformat(task["finished_at"]), -1))
    running = peak = 0
    for _, step in sorted(points, key=lambda p: (p[0], p[1])):
        running += step
        peak = max(peak, running)
    return peak


def test_no_more_tasks_run_at_once_than_the_concurrency(batch_env):
    lines = "".join(
        f'{{"id": "t{i}", "mode": "direct_chat", "model": "paced", "goal": "count"}}\n'
        for i in range(5)
    )
    suite = batch_env.suite("paced.jsonl", lines)
    report = batch_env.tmp / "paced.json"
    done = batch_env.run_tasks(str(suite), "--concurrency", "2", "--report", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    tasks = json.loads(report.read_text())["tasks"]
    assert all(t["status"] == "completed" for t in tasks)
    # The file's `model: paced` reached the runner: its script answered.
    assert all(t["model"] == "paced" and t["answer"].startswith("one two") for t in tasks)
    assert _max_overlap(tasks) == 2  # bounded, and actually concurrent


def _wait_for_line(process, needles: set[str], timeout: float = 120) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while needles and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        needles = {n for n in needles if n not in line}
    assert not needles, f"never printed {needles}; output so far: {''.join(seen)}"
    return seen


def test_ctrl_c_cancels_the_running_tasks_and_still_writes_the_report(batch_env):
    suite = batch_env.suite(
        "interrupt.yaml",
        """
        - {id: quick, mode: direct_chat, goal: hi, expect: {status: completed}}
        - {id: slow-1, mode: direct_chat, model: slow, goal: talk}
        - {id: slow-2, mode: direct_chat, model: slow, goal: talk}
        - {id: never, mode: direct_chat, goal: hi}
        """,
    )
    report, junit = batch_env.tmp / "interrupt.json", batch_env.tmp / "interrupt.xml"
    process = batch_env.popen(
        str(suite), "--concurrency", "3", "--report", str(report), "--junit", str(junit)
    )
    try:
        _wait_for_line(process, {"quick: completed", "slow-1: started", "slow-2: started"})
        # `never` waits for a slot: quick's slot goes to it only after quick ended, so make sure
        # the slow ones are mid-run and then interrupt.
        time.sleep(1.0)
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, out + err
    assert time.monotonic() - started < 30  # the slow tasks would take a minute each
    data = json.loads(report.read_text())
    statuses = {t["id"]: t["status"] for t in data["tasks"]}
    assert statuses["quick"] == "completed"
    assert statuses["slow-1"] == statuses["slow-2"] == "cancelled"
    assert statuses["never"] in ("not_started", "cancelled", "completed")
    assert data["interrupted"] is True
    ids = [t["task_id"] for t in data["tasks"] if t["id"].startswith("slow")]
    rows = batch_env.query("SELECT status FROM tasks_task WHERE id IN (?, ?)", *ids)
    assert rows == [("cancelled",), ("cancelled",)]
    skipped = [
        c.get("name") for c in ET.parse(junit).iter("testcase") if c.find("skipped") is not None
    ]
    assert {"slow-1", "slow-2"} <= set(skipped)


def test_review_wait_leaves_the_spec_to_a_person_and_an_unanswered_one_parks_the_task(batch_env):
    config = batch_env.tmp / "agentkit.yaml"
    short = batch_env.tmp / "agentkit-review-wait.yaml"
    text = config.read_text()
    assert "  timeout_seconds: 1800       # no decision" in text
    short.write_text(
        text.replace("  timeout_seconds: 1800       # no decision", "  timeout_seconds: 1 # ")
    )
    suite = batch_env.suite(
        "review-wait.yaml",
        f"""
        - id: plan
          mode: plan_exec
          source: {DEMO}
          goal: fix the failing test in tests/test_slug.py
          expect: {{status: parked}}
        """,
    )
    report = batch_env.tmp / "review-wait.json"
    done = subprocess.run(
        [sys.executable, "manage.py", "run_tasks", str(suite), "--review", "wait",
         "--report", str(report)],
        cwd=ROOT, env={**batch_env.env, "AGENTKIT_CONFIG": str(short)},
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [task] = json.loads(report.read_text())["tasks"]
    assert task["status"] == "parked"
    reviews = batch_env.query(
        "SELECT r.decision FROM specs_specreview r JOIN specs_spec s ON s.id = r.spec_id "
        "WHERE s.task_id = ?",
        task["task_id"],
    )
    assert reviews and all(decision != "confirmed" for (decision,) in reviews)
