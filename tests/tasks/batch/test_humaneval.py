"""`run_tasks --suite humaneval` as a user runs it: a subprocess on a private database, the
reference policies (agentkit.yaml's `oracle`, `null`, `wrong_first` aliases: the scripted
provider playing apps/engine/evals/policies.py) through the chat's runner, real workspaces,
the hidden tests scored in the sandbox."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from apps.engine.evals.humaneval import problems, select
from tests.tasks.batch.test_command import _wait_for_line

pytestmark = pytest.mark.slow  # spawns processes: started early (tests/conftest.py)

LIMIT = "20"


def evaluate(batch_env, model: str, *extra: str) -> tuple[dict, str]:
    report = batch_env.tmp / f"{model}.json"
    done = batch_env.run_tasks(
        "--suite", "humaneval", "--limit", LIMIT, "--compare", "react,plan_exec",
        "--model", model, "--concurrency", "8", "--report", str(report), *extra,
        timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(report.read_text()), done.stdout


def solved(data: dict, mode: str) -> int:
    return sum(1 for row in data["tasks"] if row["mode"] == mode and row["solved"])


@pytest.fixture(scope="module")
def oracle_run(batch_env):
    return evaluate(batch_env, "oracle")


def test_the_oracle_solves_every_problem_in_both_modes(oracle_run):
    data, out = oracle_run
    assert solved(data, "react") == 20 and solved(data, "plan_exec") == 20
    assert data["modes"]["plan_exec"]["solved_pct"] == 100.0
    assert data["modes"]["plan_exec"]["pass_at_1"] == 1.0
    rows = data["tasks"]
    assert len(rows) == 40 and {row["model"] for row in rows} == {"oracle"}
    assert {row["hidden_tests"] for row in rows} == {"passed"}
    assert all(row["status"] == "completed" and row["task_id"] for row in rows)
    # plan_exec verified each answer once (the oracle is right the first time); react did not.
    plan = [row for row in rows if row["mode"] == "plan_exec"]
    assert all(row["verification"] == [True] for row in plan)
    assert all(row["verification"] == [] for row in rows if row["mode"] == "react")
    # the table: per task one column per mode, then the per-mode summary
    assert "HumanEval-0 " in out and "| plan_exec" in out and "20/20 (100 %)" in out


def test_hidden_tests_never_reach_a_workspace_an_event_or_a_prompt(oracle_run, batch_env):
    data, _ = oracle_run
    chosen = {p.slug: p for p in select(limit=int(LIMIT))}
    for row in data["tasks"]:
        problem = chosen[row["id"]]
        # a line only the hidden tests have (the docstring's examples are visible by design)
        secret = next(
            line.strip()
            for line in problem.test.splitlines()
            if "assert" in line and line.strip() not in problem.prompt
        )
        ((root,),) = batch_env.query(
            "SELECT w.root_dir FROM tasks_task t JOIN tasks_workspace w ON w.id = t.workspace_id "
            "WHERE t.id = ?",
            row["task_id"],
        )
        texts = [path.read_text() for path in Path(root).rglob("*") if path.is_file()]
        assert texts and not any("def check(" in t or secret in t for t in texts)
        events = batch_env.query(
            "SELECT data FROM tasks_taskevent WHERE task_id = ?", row["task_id"]
        )
        # events hold every prompt's parts: the goal, tool results, the model's replies
        assert events and not any("def check(" in d or secret in d for (d,) in events)
        ((goal, result),) = batch_env.query(
            "SELECT goal, result FROM tasks_task WHERE id = ?", row["task_id"]
        )
        assert secret not in goal and secret not in result


def test_the_null_model_solves_nothing(batch_env):
    data, _ = evaluate(batch_env, "null")
    assert solved(data, "react") == 0 and solved(data, "plan_exec") == 0
    assert {row["hidden_tests"] for row in data["tasks"]} == {"failed"}


def test_wrong_first_is_solved_only_where_failing_tests_come_back(batch_env, oracle_run):
    oracle_report = batch_env.tmp / "oracle.json"
    data, out = evaluate(batch_env, "wrong_first", "--baseline", str(oracle_report))
    assert solved(data, "plan_exec") >= 19  # verification showed the failing example
    assert solved(data, "react") <= 1  # react verifies nothing: its first answer stands
    plan = [row for row in data["tasks"] if row["mode"] == "plan_exec" and row["solved"]]
    assert all(row["verification"][:1] == [False] and row["verification"][-1] for row in plan)
    # --baseline: compared with the oracle's report, react's tasks are newly failed
    assert "compared with" in out and "newly failed (" in out
    assert "HumanEval-0 (react)" in out.split("newly failed")[1]


def test_suite_options_are_checked_before_anything_runs(batch_env):
    bad = batch_env.run_tasks("--suite", "humaneval", "--ids", "HumanEval/999")
    assert bad.returncode == 2 and "unknown problem 'HumanEval/999'" in bad.stderr
    bad = batch_env.run_tasks("--suite", "humaneval", "--compare", "react,nope")
    assert bad.returncode == 2 and "--compare" in bad.stderr
    bad = batch_env.run_tasks("--limit", "3")
    assert bad.returncode == 2 and "--suite humaneval" in bad.stderr
    assert len(problems()) == 164


def test_repeat_gives_pass_at_k_and_the_spread(batch_env):
    report = batch_env.tmp / "repeat.json"
    done = batch_env.run_tasks(
        "--suite", "humaneval", "--ids", "HumanEval/2,HumanEval/3", "--compare", "react",
        "--model", "oracle", "--repeat", "2", "--report", str(report),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(report.read_text())
    react = data["modes"]["react"]
    assert data["repeat"] == 2 and react["runs"] == 4 and react["tasks"] == 2
    assert react["pass_at_1"] == 1.0 and react["pass_at_2"] == 1.0
    assert react["spread_pct"] == {"min": 100.0, "max": 100.0, "stdev": 0.0}
    assert data["problems"] == {"HumanEval-2": {"react": [True, True]},
                                "HumanEval-3": {"react": [True, True]}}  # fmt: skip
    assert sorted({row["repeat"] for row in data["tasks"]}) == [1, 2]
    assert "pass@2" in done.stdout and "solved % over 2 repeats: react 100–100 %" in done.stdout
    # stored for the Evaluations page, whose path the command prints
    pk = int(re.search(r"^evaluation page: /evaluations/(\d+)/$", done.stdout, re.M).group(1))
    ((suite, modes, model, repeat, interrupted, summary, outcomes),) = batch_env.query(
        "SELECT suite, modes, model, repeat, interrupted, summary, outcomes "
        "FROM tasks_evaluationrun WHERE id = ?",
        pk,
    )
    assert (suite, json.loads(modes), model, repeat, interrupted) == (
        "humaneval", ["react"], "oracle", 2, 0,
    )  # fmt: skip
    assert json.loads(summary) == data["modes"]
    stored = [(r["id"], r["repeat"], r["task_id"], r["solved"]) for r in json.loads(outcomes)]
    assert stored == [(r["id"], r["repeat"], r["task_id"], True) for r in data["tasks"]]


def test_an_interrupted_evaluation_is_stored_marked_so(batch_env):
    process = batch_env.popen(
        "--suite", "humaneval", "--ids", "HumanEval/0,HumanEval/1", "--mode", "react",
        "--model", "slow", "--concurrency", "1",
    )  # fmt: skip
    try:
        _wait_for_line(process, {"HumanEval-0: started"})
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, out + err
    pk = int(re.search(r"^evaluation page: /evaluations/(\d+)/$", out, re.M).group(1))
    ((interrupted, outcomes),) = batch_env.query(
        "SELECT interrupted, outcomes FROM tasks_evaluationrun WHERE id = ?", pk
    )
    assert interrupted == 1
    statuses = {r["id"]: r["status"] for r in json.loads(outcomes)}
    assert statuses == {"HumanEval-0": "cancelled", "HumanEval-1": "not_started"}


def test_pass_at_k_is_the_unbiased_estimator():
    from apps.tasks.batch.evaluation import pass_at_k

    assert pass_at_k(4, 0, 1) == 0.0 and pass_at_k(4, 4, 2) == 1.0
    assert pass_at_k(4, 1, 1) == 0.25
    assert abs(pass_at_k(4, 1, 2) - 0.5) < 1e-9  # 1 - C(3,2)/C(4,2) = 1 - 3/6


def test_a_policy_needs_the_scripted_provider():
    from pydantic import ValidationError

    from apps.engine.config import ModelConfig

    assert ModelConfig(provider="scripted", policy="oracle").policy == "oracle"
    with pytest.raises(ValidationError, match="needs provider 'scripted'"):
        ModelConfig(provider="anthropic", policy="oracle")


def test_rows_name_the_model_a_task_ran_on_when_it_named_none(batch_env):
    report = batch_env.tmp / "default-model.json"
    done = batch_env.run_tasks(
        "--suite", "humaneval", "--ids", "0", "--mode", "react", "--report", str(report)
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (row,) = json.loads(report.read_text())["tasks"]
    assert row["model"] == "main"  # llm.main, from the run's task_started event
    assert row["hidden_tests"] == "failed" and row["solved"] is False  # the demo script


def test_the_oracle_solves_in_team_collab_too(batch_env):
    report = batch_env.tmp / "team.json"
    done = batch_env.run_tasks(
        "--suite", "humaneval", "--ids", "HumanEval/0,HumanEval/1", "--compare",
        "react,team_collab", "--model", "oracle", "--report", str(report),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(report.read_text())
    assert solved(data, "team_collab") == 2 and solved(data, "react") == 2
    team = [row for row in data["tasks"] if row["mode"] == "team_collab"]
    assert all(row["status"] == "completed" and row["verification"] == [True] for row in team)


async def test_the_hidden_check_runs_in_the_sandbox_with_a_time_limit(tmp_path):
    from apps.engine.evals.humaneval import STUB_BODY
    from apps.engine.sandbox import Sandbox
    from apps.tasks.batch.spec import TaskSpec
    from apps.tasks.batch.suites import HiddenScorer

    problem = problems()["HumanEval/0"]
    spec = TaskSpec(id=problem.slug, goal=problem.goal(), mode="react", line=0)
    scorer = HiddenScorer({problem.slug: problem}, Sandbox(), timeout=3)
    bodies = {
        "passed": problem.canonical_solution,
        "failed": "    return False\n",
        "timed_out": "    while True:\n        pass\n",
        # the model's code cannot reach the network while it is scored
        "failed_offline": "    import socket\n    socket.create_connection(('1.1.1.1', 53), 2)\n",
    }
    for expected, body in bodies.items():
        workspace = tmp_path / expected
        workspace.mkdir()
        (workspace / "solution.py").write_text(problem.stub().replace(STUB_BODY, body))
        verdict = await scorer(spec, workspace)
        assert verdict["hidden_tests"] == expected.removesuffix("_offline"), (expected, verdict)
        assert verdict["solved"] is (expected == "passed")
    assert "OSError" in verdict["detail"] or "Error" in verdict["detail"]
