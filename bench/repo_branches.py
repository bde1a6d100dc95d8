"""Repository branches: 8 Agent tasks on one repository with 4 running at a time, each task in its
own worktree on its own branch (issue 39), against the same 8 tasks under the one-writer-per-
workspace rule of before (the same repository registered as a plain directory: one task at a
time). Target: >= 3x faster.

Each task is a react run of two model calls (create a file of its own with str_replace_editor,
then answer) through the real command (`run_tasks FILE --workspace NAME --concurrency 4`): Task
rows, events, the chat's runner, real git worktrees and commits, on a private SQLite file. The
model is the offline scripted one with a fixed delay per streamed chunk (`chunk_delay_ms`), so a
step costs a fixed ~STEP_SECONDS as a real model's latency would. The figure is the run's own
wall time from the JSON report. The two configurations alternate over REPEATS rounds (the
machine is shared); each one's best round is kept.

Deviation from the issue's wording: the 4 "workers" are 4 concurrent runs of one `run_tasks`
process (inline executor), not `make cluster`'s 4 RQ worker processes; the lease that decides
whether they may run at once is the same database row either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._harness import report
from tests.support import ROOT, manage, server_env

TASKS = 8
WORKERS = 4
WORDS = 20
CHUNK_DELAY_MS = 50  # a step streams WORDS chunks: about 1 s per model call
REPEATS = int(os.environ.get("AGENTKIT_BENCH_REPEATS", "2"))
TARGET_SPEEDUP = 3.0
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


def _script() -> str:
    words = " ".join(f"w{i}" for i in range(WORDS))
    turns = [
        {
            "match": f"bench task {i}\\b",
            "role": "user",
            "repeat": True,
            "text": words,
            "tool_calls": [
                {
                    "name": "str_replace_editor",
                    "arguments": {
                        "command": "create",
                        "path": f"part_{i}.py",
                        "file_text": f"PART_{i} = {i}\n",
                    },
                }
            ],
        }
        for i in range(TASKS)
    ]
    turns.append({"role": "tool", "repeat": True, "text": words})
    return json.dumps({"turns": turns})


def _setup(tmp: Path) -> dict[str, str]:
    (tmp / "script.json").write_text(_script())
    config = {
        "models": {
            "main": {
                "provider": "scripted",
                "script": str(tmp / "script.json"),
                "chunk_delay_ms": CHUNK_DELAY_MS,
            }
        },
        "evolution": {"enabled": False},
        "repo_map": {"enabled": False},
        "workspaces": {"allowed_roots": [str(tmp)]},
    }
    (tmp / "agentkit.yaml").write_text(json.dumps(config))
    env = server_env(tmp, AGENTKIT_CONFIG=str(tmp / "agentkit.yaml"))
    for args in (("migrate", "--noinput", "-v", "0"), ("bootstrap",)):
        done = manage(env, *args)
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed: {done.stderr[-2000:]}")
    return env


def _workspace(tmp: Path, env: dict[str, str], name: str, *, repository: bool) -> None:
    """A fresh repository registered as workspace `name`: a repository workspace, or (the old
    rule) a plain directory."""
    root = tmp / name
    root.mkdir()
    (root / "README.md").write_text("bench\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    base = "main" if repository else ""
    code = (
        "from django.contrib.auth.models import User; from apps.tasks.models import Workspace; "
        "from apps.tasks.services import workspace_create; "
        f"ws = workspace_create(name={name!r}, root_dir={str(root)!r}, "
        "members=[User.objects.get(username='admin')]); "
        f"Workspace.objects.filter(pk=ws.pk).update(base_branch={base!r})"
    )
    done = manage(env, "shell", "-c", code)
    if done.returncode != 0:
        raise RuntimeError(f"could not register {name}: {done.stderr[-2000:]}")


def _run(tmp: Path, env: dict[str, str], name: str) -> tuple[float, list[dict]]:
    suite = tmp / f"{name}.jsonl"
    suite.write_text(
        "".join(
            json.dumps({"id": f"t{i}", "mode": "react", "goal": f"bench task {i}: add a part",
                        "expect": {"status": "completed"}}) + "\n"
            for i in range(TASKS)
        )
    )  # fmt: skip
    out = tmp / f"{name}.json"
    done = subprocess.run(
        [sys.executable, "manage.py", "run_tasks", str(suite), "--workspace", name,
         "--concurrency", str(WORKERS), "--report", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"run_tasks failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    data = json.loads(out.read_text())
    return data["summary"]["wall_seconds"], data["tasks"]


def main() -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-branches-") as tmp_name:
        tmp = Path(tmp_name)
        env = _setup(tmp)
        load_before = os.getloadavg()[0]
        rounds = []
        for r in range(REPEATS):
            _workspace(tmp, env, f"branches{r}", repository=True)
            _workspace(tmp, env, f"onewriter{r}", repository=False)
            branches, rows = _run(tmp, env, f"branches{r}")
            one_writer, _ = _run(tmp, env, f"onewriter{r}")
            distinct = len({row["branch"] for row in rows if row["branch"] and row["commit"]})
            rounds.append(
                {"branches": branches, "one_writer": one_writer, "branches_made": distinct}
            )
        load_after = os.getloadavg()[0]
    branches = min(r["branches"] for r in rounds)
    one_writer = min(r["one_writer"] for r in rounds)
    speedup = one_writer / branches
    figures = {
        "tasks": TASKS,
        "workers": WORKERS,
        "model_calls_per_task": 2,
        "chunk_delay_ms": CHUNK_DELAY_MS,
        "chunks_per_call": WORDS,
        "rounds": REPEATS,
        "wall_seconds_branches": branches,
        "wall_seconds_one_writer": one_writer,
        "speedup_branches_vs_one_writer": round(speedup, 2),
        "speedup_per_round": [round(r["one_writer"] / r["branches"], 2) for r in rounds],
        "branches_with_a_commit_per_round": [r["branches_made"] for r in rounds],
        "target_speedup": TARGET_SPEEDUP,
        "meets_target": speedup >= TARGET_SPEEDUP,
        "load_average_1min_before": round(load_before, 2),
        "load_average_1min_after": round(load_after, 2),
    }
    rows = [
        (f"{TASKS} tasks, {WORKERS} at a time, own branches", f"{branches:.2f} s"),
        (f"{TASKS} tasks, one writer per workspace", f"{one_writer:.2f} s"),
        ("speed-up", f"{speedup:.1f}x (target >= {TARGET_SPEEDUP:g}x)"),
        ("speed-up per round", ", ".join(f"{x}x" for x in figures["speedup_per_round"])),
        ("branches with a commit per round", str(figures["branches_with_a_commit_per_round"])),
        ("load average (1 min) before / after", f"{load_before:.2f} / {load_after:.2f}"),
    ]
    report("repo_branches", figures, table=rows)
    return figures


if __name__ == "__main__":
    main()
