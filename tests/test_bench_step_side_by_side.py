"""bench/step_side_by_side.py's agentkit side runs a real task on the engine as it is today (a
changed engine API breaks it here, not in the next `make bench`), and reads the marginal step from
the fastest tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import step_side_by_side

ROOT = Path(__file__).resolve().parent.parent


def test_the_agentkit_side_runs_its_tasks_to_the_end_and_reports_both_lengths():
    core = str(min(os.sched_getaffinity(0)))
    done = subprocess.run(
        [sys.executable, "-m", "bench._step_agentkit", core],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert 0 < result["short_s"] < result["long_s"]
    assert result["marginal_us"] > 0


def test_the_floor_is_the_fastest_long_task_less_the_fastest_short_one():
    runs = [
        {"short_s": 0.0010, "long_s": 0.0030},
        {"short_s": 0.0008, "long_s": 0.0034},  # a noisy long task: its short one still counts
        {"short_s": 0.0012, "long_s": 0.0026},
    ]
    steps = step_side_by_side.LONG - step_side_by_side.SHORT
    assert step_side_by_side.floor_us(runs) == (0.0026 - 0.0008) / steps * 1e6
