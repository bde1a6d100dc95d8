"""Run every benchmark module in bench/ (or the ones named on the command line), then print the
scoreboard (bench/_targets.py): each figure next to its target, from bench/results/*.json.

    python -m bench                 # every benchmark, then the whole table
    python -m bench NAME [NAME...]  # those benchmarks, then their rows of the table
    python -m bench --table         # only the table, from the results files as they are
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentkit_site.settings")


def discover() -> list[str]:
    here = Path(__file__).resolve().parent
    return sorted(p.stem for p in here.glob("*.py") if not p.stem.startswith("_"))


def scoreboard(names: list[str] | None, durations: dict[str, float]) -> str:
    from bench._targets import TARGETS, evaluate, render

    table = render(evaluate(benchmarks=names), durations)
    untargeted = sorted(set(names or discover()) - {target.benchmark for target in TARGETS})
    if untargeted:
        table += f"\nno target (figures in their results files): {', '.join(untargeted)}"
    return table


def main(argv: list[str]) -> int:
    if argv == ["--table"]:
        print(scoreboard(None, {}))
        return 0
    if len(argv) == 2 and argv[0] == "--one":  # one benchmark, no table (the parent prints it)
        importlib.import_module(f"bench.{argv[1]}").main()
        return 0
    names = argv or discover()
    if not names:
        print("no benchmarks yet (add bench/<name>.py with a main())")
        return 0
    failed, durations = [], {}
    for name in names:
        started = time.monotonic()
        print(f"-- running bench/{name}.py", flush=True)
        if len(names) == 1:
            try:
                importlib.import_module(f"bench.{name}").main()
            except Exception as exc:
                failed.append(name)
                print(f"!! bench/{name}.py failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        else:
            # Each in its own process: Django is set up once per process, on the database of the
            # first benchmark that sets it up, and a benchmark's threads or loops must not skew the
            # next one. One broken benchmark must not hide the others.
            done = subprocess.run([sys.executable, "-m", "bench", "--one", name], check=False)
            if done.returncode != 0:
                failed.append(name)
                print(f"!! bench/{name}.py failed (exit {done.returncode})", file=sys.stderr)
        durations[name] = time.monotonic() - started
        print(f"-- bench/{name}.py took {durations[name]:.1f} s", flush=True)
    print("\n== scoreboard (bench/_targets.py; figures from bench/results/*.json)")
    print(scoreboard(None if not argv else names, durations))
    if failed:
        print(f"!! failed: {', '.join(failed)} (their rows show the last results written)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
