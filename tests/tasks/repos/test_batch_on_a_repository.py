"""`run_tasks FILE --workspace NAME` on a repository workspace (issue 39): the tasks run at the
same time, each on its own branch, and the report carries each one's `branch` and `commit`. A
subprocess on a private database, the scripted model, a real git repository."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import datetime

from tests.support import ROOT, manage, server_env
from tests.tasks.repos.support import config_text, git, make_remote


def test_run_tasks_on_a_repository_runs_tasks_in_parallel_on_their_own_branches(tmp_path):
    remote = make_remote(tmp_path)
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(remote), str(checkout))
    config = tmp_path / "agentkit.yaml"
    config.write_text(config_text(tmp_path, delay_ms=30))
    env = server_env(tmp_path, AGENTKIT_CONFIG=str(config))
    for args in (("migrate", "--noinput", "-v", "0"), ("bootstrap",)):
        done = manage(env, *args)
        assert done.returncode == 0, done.stderr
    register = (
        "from django.contrib.auth.models import User; "
        "from apps.tasks.conf import agent_config; "
        "from apps.tasks.workspaces.workspaces import workspace_create_from_directory as make; "
        f"make(user=User.objects.get(username='admin'), name='repo', directory={str(checkout)!r},"
        " config=agent_config())"
    )
    done = manage(env, "shell", "-c", register)
    assert done.returncode == 0, done.stderr
    suite = tmp_path / "tasks.yaml"
    suite.write_text(
        textwrap.dedent(
            """
            tasks:
              - {id: alpha, mode: react, goal: add ALPHA, expect: {status: completed}}
              - {id: beta, mode: react, goal: add BETA, expect: {status: completed}}
            """
        )
    )
    report = tmp_path / "report.json"
    args = ["--workspace", "repo", "--concurrency", "2", "--report", str(report)]
    done = subprocess.run(
        [sys.executable, "manage.py", "run_tasks", str(suite), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["id"]: row for row in json.loads(report.read_text())["tasks"]}
    alpha, beta = rows["alpha"], rows["beta"]
    assert alpha["branch"] == f"agentkit/{alpha['task_id']}-add-alpha"
    assert beta["branch"] == f"agentkit/{beta['task_id']}-add-beta"
    for row, name in ((alpha, "alpha.py"), (beta, "beta.py")):
        assert git(checkout, "rev-parse", f"refs/heads/{row['branch']}") == row["commit"]
        assert git(checkout, "show", "--name-only", "--format=", row["commit"]) == name
    # At the same time, not one after the other.
    start = {k: datetime.fromisoformat(r["started_at"]) for k, r in rows.items()}
    end = {k: datetime.fromisoformat(r["finished_at"]) for k, r in rows.items()}
    assert start["alpha"] < end["beta"] and start["beta"] < end["alpha"]
    assert not (checkout / "alpha.py").exists()  # the base checkout is untouched
