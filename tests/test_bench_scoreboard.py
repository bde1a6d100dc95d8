"""The `make bench` scoreboard (bench/_targets.py): figures read from results files, compared with
their targets; a missing file is "not run", a missing figure "no figure"."""

from __future__ import annotations

import json
import subprocess
import sys

from bench._targets import MET, MISSED, NO_FIGURE, NOT_RUN, TARGETS, Target, evaluate, render
from tests.support import ROOT

TARGETS_UNDER_TEST = (
    Target("speed", "median latency", "latency_ms.median", "<=", 10.0, "ms"),
    Target("speed", "speed-up", "speedup", ">=", 6.0, "×"),
    Target("cache", "hit rate", "hit_rate", ">=", 97.0, "%", scale=100),
    Target("stream", "p95", "p95_ms", "<=", unit="ms", limit_path="flush_ms", offset=10.0),
    Target("absent", "never written", "x", "<", 1.0),
)


def write(folder, name, figures):
    payload = {"benchmark": name, "when": "2026-11-23T12:00:00Z", "figures": figures}
    (folder / f"{name}.json").write_text(json.dumps(payload))


def statuses(rows):
    return [(row.target.label, row.status, row.figure, row.limit) for row in rows]


def test_each_target_is_met_missed_not_run_or_without_its_figure(tmp_path):
    write(tmp_path, "speed", {"latency_ms": {"median": 9.5}, "speedup": 3.1})
    write(tmp_path, "cache", {"hit_rate": 0.967})
    write(tmp_path, "stream", {"p95_ms": 58.0, "flush_ms": 50})
    rows = evaluate(tmp_path, TARGETS_UNDER_TEST)
    assert statuses(rows) == [
        ("median latency", MET, 9.5, 10.0),
        ("speed-up", MISSED, 3.1, 6.0),
        ("hit rate", MISSED, 96.7, 97.0),
        ("p95", MET, 58.0, 60.0),
        ("never written", NOT_RUN, None, 1.0),
    ]


def test_a_file_without_the_figure_or_with_a_non_number_reads_no_figure(tmp_path):
    write(tmp_path, "speed", {"latency_ms": {"p90": 3.0}, "speedup": "fast"})
    write(tmp_path, "stream", {"p95_ms": 58.0})  # the limit's own figure is missing
    (tmp_path / "cache.json").write_text("{not json")
    rows = evaluate(tmp_path, TARGETS_UNDER_TEST)
    assert [row.status for row in rows] == [NO_FIGURE, NO_FIGURE, NOT_RUN, NO_FIGURE, NOT_RUN]


def test_the_limit_is_inclusive_or_strict_as_the_target_says(tmp_path):
    write(tmp_path, "edge", {"value": 50.0})
    at_limit = (
        Target("edge", "strict", "value", "<", 50.0),
        Target("edge", "inclusive", "value", "<=", 50.0),
        Target("edge", "at least", "value", ">=", 50.0),
        Target("edge", "more than", "value", ">", 50.0),
    )
    assert [row.status for row in evaluate(tmp_path, at_limit)] == [MISSED, MET, MET, MISSED]


def test_only_the_named_benchmarks_rows_when_names_are_given(tmp_path):
    write(tmp_path, "cache", {"hit_rate": 0.99})
    rows = evaluate(tmp_path, TARGETS_UNDER_TEST, benchmarks=["cache"])
    assert statuses(rows) == [("hit rate", MET, 99.0, 97.0)]


def test_the_table_shows_each_figure_next_to_its_target_and_the_totals(tmp_path):
    write(tmp_path, "speed", {"latency_ms": {"median": 9.5}, "speedup": 3.1})
    write(tmp_path, "stream", {"p95_ms": 58.0, "flush_ms": 50})
    table = render(evaluate(tmp_path, TARGETS_UNDER_TEST), {"speed": 12.4, "stream": 30.0})
    lines = table.splitlines()
    assert lines[0].split() == ["benchmark", "figure", "value", "target", "status"]
    speed = next(line for line in lines if "median latency" in line)
    assert "9.50 ms" in speed and "<= 10.0 ms" in speed and speed.rstrip().endswith(MET)
    speedup = next(line for line in lines if "speed-up" in line)
    assert "3.10×" in speedup and ">= 6.00×" in speedup and MISSED in speedup
    stream = next(line for line in lines if line.startswith("stream"))
    assert "<= 60.0 ms" in stream
    absent = next(line for line in lines if line.startswith("absent"))
    assert NOT_RUN in absent and "—" in absent
    assert "2 met, 1 missed, 2 not run or without the figure" in table
    assert "took 42 s in all" in table


def test_every_target_names_a_benchmark_module_and_a_figure_its_results_file_has():
    results = ROOT / "bench" / "results"
    for target in TARGETS:
        assert (ROOT / "bench" / f"{target.benchmark}.py").exists() or not (
            results / f"{target.benchmark}.json"
        ).exists(), target.benchmark
    present = [row for row in evaluate(results) if row.status != NOT_RUN]
    assert present, "no results files in bench/results"
    assert [row.target.label for row in present if row.status == NO_FIGURE] == []


def test_python_m_bench_table_prints_the_scoreboard_without_running_anything():
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--table"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines()[0].split() == [
        "benchmark",
        "figure",
        "value",
        "target",
        "status",
    ]
    for target in TARGETS:
        assert target.label in done.stdout
