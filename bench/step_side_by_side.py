"""agentkit's marginal tool-call step beside smolagents', on this machine, and on the scale of the
outside side-by-side that issue 31's bar comes from.

Why: bench/engine_overhead charges the engine with everything but the model's stream (events,
compression check, conversation bookkeeping) on the thread's CPU time, and says ~30 µs on a day
when an outside side-by-side (each framework in its own process, pinned to one core, 5 repeats)
measured agentkit's step at 10.4 µs and smolagents' at 124 µs. Issue 31's bar (≤ 25 µs) is on
that outside scale, and the absolute figure moves with the host (the same tree measured 28-31 µs
one day and ~48 µs the next). This benchmark measures both frameworks the outside way, on the
same core, alternating, and reads agentkit's step on the outside's scale by smolagents' step:
agentkit × (124 µs ÷ smolagents here). The ratio is the host-independent figure.

How: each framework in its own process pinned to the same core (the machine's last), a
zero-latency model written in the harness that calls a no-op tool N times and then answers, the
wall time of the fastest task of 30 steps less that of the fastest of 10 steps, over 20, the
fastest of 25 tasks in each of 7 processes per framework (alternating): host noise only adds
time, so the floor is the steadiest figure; each process's own figure is kept beside it. smolagents (pinned version) runs from its own virtual
environment under var/bench/, made on the first run from the package index; where that cannot be
made, the agentkit side is still reported and the scaled figure reads "no figure".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench._harness import report

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "var" / "bench" / "smolagents-venv"
SMOLAGENTS = "smolagents==1.26.0"
REPEATS = 7
SHORT, LONG = 10, 30  # steps of the short and long tasks (as in both sides' scripts)
# The outside side-by-side's figures (issue 31): the scale that its 25 µs bar is on.
OUTSIDE_AGENTKIT_US = 10.4
OUTSIDE_SMOLAGENTS_US = 124.0


def smolagents_python() -> tuple[Path | None, str]:
    """The smolagents environment's interpreter, made once; (None, why) where it cannot be."""
    python = VENV / "bin" / "python"
    marker = VENV / "installed.txt"
    if marker.exists() and marker.read_text().strip() == SMOLAGENTS:
        return python, ""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(VENV)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", SMOLAGENTS],
    ]
    for command in steps:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
        if done.returncode != 0:
            return None, f"`{' '.join(command[-3:])}` failed: {done.stderr.strip()[-300:]}"
    marker.write_text(SMOLAGENTS + "\n")
    return python, ""


def measure(command: list[str]) -> dict:
    done = subprocess.run(
        command, capture_output=True, text=True, check=True, cwd=ROOT, timeout=600
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def floor_us(results: list[dict]) -> float:
    """The marginal step from the fastest short and the fastest long task of all repeats: on a
    host whose noise only ever adds time, the floor is the steadiest estimate of the cost."""
    short = min(result["short_s"] for result in results)
    long = min(result["long_s"] for result in results)
    return (long - short) / (LONG - SHORT) * 1e6


def main() -> dict:
    core = str((os.cpu_count() or 1) - 1)
    python, why = smolagents_python()
    agentkit: list[dict] = []
    smol: list[dict] = []
    for _ in range(REPEATS):
        agentkit.append(measure([sys.executable, "-m", "bench._step_agentkit", core]))
        if python is not None:
            smol.append(measure([str(python), str(ROOT / "bench" / "_step_smolagents.py"), core]))
    figures: dict = {
        "core": int(core),
        "repeats": REPEATS,
        "agentkit_us": {
            "floor": floor_us(agentkit),
            "runs": [result["marginal_us"] for result in agentkit],
        },
        "outside": {"agentkit_us": OUTSIDE_AGENTKIT_US, "smolagents_us": OUTSIDE_SMOLAGENTS_US},
    }
    rows = [("agentkit marginal step here", f"{figures['agentkit_us']['floor']:.1f} µs")]
    if smol:
        version = smol[-1]["version"]
        ratio = figures["agentkit_us"]["floor"] / floor_us(smol)
        figures["smolagents"] = {
            "version": version,
            "floor": floor_us(smol),
            "runs": [result["marginal_us"] for result in smol],
        }
        figures["ratio_to_smolagents"] = ratio
        figures["agentkit_on_outside_scale_us"] = ratio * OUTSIDE_SMOLAGENTS_US
        outside_ratio = OUTSIDE_AGENTKIT_US / OUTSIDE_SMOLAGENTS_US
        rows += [
            (f"smolagents {version} marginal step here", f"{floor_us(smol):.1f} µs"),
            ("agentkit ÷ smolagents", f"{ratio:.3f} (outside: {outside_ratio:.3f})"),
            (
                "agentkit on the outside run's scale",
                f"{figures['agentkit_on_outside_scale_us']:.1f} µs (target <= 25 µs)",
            ),
        ]
    else:
        figures["smolagents"] = {"error": why}
        rows.append(("smolagents", f"not measured: {why}"))
    report("step_side_by_side", figures, table=rows)
    return figures


if __name__ == "__main__":
    main()
