"""Tiny shared harness: each benchmark module defines `main() -> dict` and calls `report()`."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summarize(values: list[float]) -> dict:
    return {
        "n": len(values),
        "median": statistics.median(values) if values else float("nan"),
        "p90": percentile(values, 0.9),
        "min": min(values) if values else float("nan"),
        "max": max(values) if values else float("nan"),
    }


def report(name: str, figures: dict, *, table: list[tuple[str, str]] | None = None) -> Path:
    """Write bench/results/<name>.json and print a two-column table of the headline figures."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "figures": figures,
    }
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    rows = table or [
        (key, str(value)) for key, value in figures.items() if not isinstance(value, dict)
    ]
    width = max((len(label) for label, _ in rows), default=10)
    print(f"\n== {name}", file=sys.stdout)
    for label, value in rows:
        print(f"  {label.ljust(width)}  {value}")
    print(f"  -> {path.relative_to(RESULTS.parent.parent)}")
    return path
