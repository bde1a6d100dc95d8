"""Batch scaling: `run_tasks` with N = 1, 2, 4, 8 concurrent tasks against the fake LLM server
(its own process) answering every request after 200 ms, and the same 8 tasks one at a time.
Target: 8 concurrent tasks finish >= 6x faster than 8 sequential ones.

Each task is a react run of three model calls (think -> read_file -> answer) in a fresh copy of
a one-file workspace, through the real command: Task rows, events and workspaces on a private
SQLite file, the chat's runner, the OpenAI provider over HTTP. The figure is the run's own wall
time from the JSON report (the command's start-up, the same for every N, is left out).

The machine is shared, and its load changes over a minute: the configurations run in REPEATS
rounds, each round every concurrent size and then the 8 tasks one at a time, so sequential and
concurrent runs alternate and meet the same load; each configuration's best round is kept. The
load average before and after, and each round's own speed-up, are in the results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._harness import report
from tests.fakes.llm_process import running_in_subprocess
from tests.support import ROOT, manage, server_env

LATENCY_S = 0.2
SIZES = (1, 2, 4, 8)
REPEATS = int(os.environ.get("AGENTKIT_BENCH_REPEATS", "3"))
TARGET_SPEEDUP = 6.0
SCRIPT = """\
turns:
  - match: 'batch bench task'
    role: user
    repeat: true
    text: "Thinking first."
    tool_calls:
      - name: think
        arguments: {thought: "Read the notes, then answer."}
  - after_tool: think
    repeat: true
    text: "Reading the notes."
    tool_calls:
      - name: read_file
        arguments: {path: notes.txt}
  - after_tool: read_file
    repeat: true
    text: "The notes say hello."
"""


def _setup(tmp: Path, base_url: str) -> dict[str, str]:
    config = tmp / "agentkit.yaml"
    config.write_text(
        json.dumps(
            {
                "models": {"main": {"provider": "openai", "model": "fake", "base_url": base_url}},
                "evolution": {"enabled": False},
            }
        )
    )
    (tmp / "source").mkdir()
    (tmp / "source" / "notes.txt").write_text("hello\n")
    env = server_env(tmp, AGENTKIT_CONFIG=str(config))
    for args in (("migrate", "--noinput", "-v", "0"), ("bootstrap",)):
        done = manage(env, *args)
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed: {done.stderr[-2000:]}")
    return env


def _run(tmp: Path, env: dict[str, str], tasks: int, concurrency: int) -> float:
    suite = tmp / f"suite-{tasks}.jsonl"
    suite.write_text(
        "".join(
            json.dumps(
                {"id": f"t{i}", "mode": "react", "source": "source",
                 "goal": f"batch bench task {i}: read notes.txt", "expect": {"status": "completed"}}
            ) + "\n"
            for i in range(tasks)
        )
    )  # fmt: skip
    out = tmp / "report.json"
    done = subprocess.run(
        [sys.executable, "manage.py", "run_tasks", str(suite), "--concurrency", str(concurrency),
         "--report", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"run_tasks failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())["summary"]["wall_seconds"]


def main() -> dict:
    with (
        tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp_name,
        running_in_subprocess(script=_write_script(Path(tmp_name)), ttft=LATENCY_S) as url,
    ):
        tmp = Path(tmp_name)
        env = _setup(tmp, f"{url}/v1")
        load_before = os.getloadavg()[0]
        rounds: list[dict[int, float]] = []
        for _ in range(REPEATS):  # concurrent and sequential runs alternate (module docstring)
            walls = {n: _run(tmp, env, n, n) for n in SIZES}
            walls[0] = _run(tmp, env, 8, 1)  # 0: the 8 tasks one at a time
            rounds.append(walls)
        load_after = os.getloadavg()[0]
    concurrent = {n: min(r[n] for r in rounds) for n in SIZES}
    sequential = min(r[0] for r in rounds)
    speedup = sequential / concurrent[8]
    figures = {
        "model_latency_ms": LATENCY_S * 1000,
        "model_calls_per_task": 3,
        "rounds": REPEATS,
        "wall_seconds_concurrent": {str(n): concurrent[n] for n in SIZES},
        "wall_seconds_8_sequential": sequential,
        "speedup_8_concurrent_vs_sequential": round(speedup, 2),
        # each round's sequential run over its own 8-concurrent run
        "speedup_per_round": [round(r[0] / r[8], 2) for r in rounds],
        "target_speedup": TARGET_SPEEDUP,
        "meets_target": speedup >= TARGET_SPEEDUP,
        # The machine is shared: its load around the run says how much CPU the tasks had.
        "load_average_1min_before": round(load_before, 2),
        "load_average_1min_after": round(load_after, 2),
    }
    rows = [(f"{n} concurrent tasks", f"{concurrent[n]:.2f} s") for n in SIZES]
    rows += [
        ("8 tasks one at a time", f"{sequential:.2f} s"),
        ("speed-up 8 concurrent vs sequential", f"{speedup:.1f}x (target >= {TARGET_SPEEDUP:g}x)"),
        ("speed-up per round", ", ".join(f"{x}x" for x in figures["speedup_per_round"])),
        ("load average (1 min) before / after", f"{load_before:.2f} / {load_after:.2f}"),
    ]
    report("batch_scaling", figures, table=rows)
    return figures


def _write_script(tmp: Path) -> Path:
    path = tmp / "script.yaml"
    path.write_text(SCRIPT)
    return path
