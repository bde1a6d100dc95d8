"""The scoreboard: every benchmark figure that has a target, the target, and the one table that
`make bench` prints at the end (`python -m bench --table` prints it without running anything).

A Target names a benchmark (its results file, bench/results/<benchmark>.json), a path into that
file's "figures" (keys joined by dots), a comparison and a limit. The table reads the results
files as they are after the runs, so a benchmark added later shows up once its Target is here;
a benchmark that has not written its file yet reads "not run", a file without the figure
"no figure". Where a limit depends on the run (streaming: the flush interval + 10 ms) it is
read from the same file (`limit_path`, plus `offset`).
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._harness import RESULTS

COMPARE = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
MET, MISSED, NOT_RUN, NO_FIGURE = "met", "MISSED", "not run", "no figure"


@dataclass(frozen=True, slots=True)
class Target:
    benchmark: str
    label: str
    path: str  # into the results file's "figures", keys joined by "."
    op: str  # one of COMPARE
    limit: float = 0.0
    unit: str = ""
    scale: float = 1.0  # shown and compared as figure * scale (a fraction as %: 100)
    limit_path: str | None = None  # the limit is this figure (times scale) + offset
    offset: float = 0.0
    source: str = ""  # where the target comes from

    def limit_for(self, figures: dict[str, Any]) -> float | None:
        if self.limit_path is None:
            return self.limit
        base = lookup(figures, self.limit_path)
        return None if not _is_number(base) else base * self.scale + self.offset


TARGETS: tuple[Target, ...] = (
    Target(
        "llm_gateway",
        "SSE decode of one long line: µs per KB, 400 KB ÷ 25 KB (linear: ~1)",
        "long_lines.linearity",
        "<=",
        1.5,
        "×",
        source="issue 10 (linear decoder)",
    ),
    Target(
        "engine_overhead",
        "marginal tool-call step, CPU (fit of per-size minimums)",
        "marginal_step.react.cpu.fit_of_minimums.marginal_us",
        "<=",
        35.0,
        "µs",
        source="issue 17",
    ),
    Target(
        "engine_overhead",
        "marginal tool-call step, CPU (median of round slopes)",
        "marginal_step.react.cpu.round_slopes_us.median",
        "<=",
        35.0,
        "µs",
        source="issue 17",
    ),
    Target(
        "step_side_by_side",
        "marginal step on the outside side-by-side's scale (by smolagents' step)",
        "agentkit_on_outside_scale_us",
        "<=",
        25.0,
        "µs",
        source="issue 31",
    ),
    Target(
        "engine_overhead",
        "plan_exec ÷ react overhead per step (median of pairs)",
        "plan_exec_overhead_ratio",
        "<=",
        1.10,
        "×",
        source="issue 11",
    ),
    Target(
        "prompt_cache",
        "50-turn task: input cost saved by caching",
        "input_cost_reduction",
        ">=",
        85.0,
        "%",
        scale=100,
        source="issue 13",
    ),
    Target(
        "prompt_cache",
        "50-turn task: warm-turn input tokens read from cache",
        "warm_turn_hit_rate",
        ">=",
        97.0,
        "%",
        scale=100,
        source="issue 13",
    ),
    Target(
        "compression",
        "150-turn session: cost compressed ÷ uncompressed",
        "cost_ratio",
        "<=",
        0.5,
        "×",
        source="issue 13",
    ),
    Target(
        "chat_page",
        "chat page, 2,000 events: last event → frame (median)",
        "last_event_to_frame_ms.median",
        "<",
        50.0,
        "ms",
        source="issue 12",
    ),
    Target(
        "evolution_retrieval",
        "pitfall retrieval, 10,000 pitfalls (p95)",
        "search_p95_ms",
        "<=",
        10.0,
        "ms",
        source="issue 16",
    ),
    Target(
        "evolution_retrieval",
        "evolution scheduling at task end (p95)",
        "schedule_failed_p95_ms",
        "<",
        50.0,
        "ms",
        source="issue 16",
    ),
    Target(
        "read_file_symbols",
        "read_file(symbol=) vs whole file: fewer tokens (median)",
        "median_ratio",
        ">=",
        10.0,
        "×",
        source="issue 10",
    ),
    Target(
        "chat_load",
        "50 sockets: first event (median)",
        "first_event_seconds.median",
        "<=",
        0.5,
        "s",
        source="issue 17",
    ),
    Target(
        "streaming",
        "50 sockets: model chunk → WebSocket frame (p95), ≤ flush + 10 ms",
        "p95_chunk_to_frame_ms",
        "<=",
        unit="ms",
        limit_path="flush_interval_ms",
        offset=10.0,
        source="issue 17",
    ),
    Target(
        "batch_scaling",
        "8 concurrent tasks vs 8 sequential, 200 ms model latency: speed-up",
        "speedup_8_concurrent_vs_sequential",
        ">=",
        6.0,
        "×",
        source="issue 17",
    ),
    Target(
        "repo_branches",
        "8 tasks on one repository, 4 at a time, own branches vs one writer per workspace",
        "speedup_branches_vs_one_writer",
        ">=",
        3.0,
        "×",
        source="issue 39",
    ),
    Target(
        "humaneval",
        "HumanEval 164 × react, plan_exec with the oracle at concurrency 8: wall time",
        "wall_seconds",
        "<=",
        600.0,
        "s",
        source="issue 28",
    ),
    Target(
        "humaneval",
        "HumanEval with the oracle: problems solved in plan_exec (all, or the harness is wrong)",
        "modes.plan_exec.solved",
        ">=",
        164,
        source="issue 28",
    ),
    Target(
        "cluster",
        "make cluster, 2 web: tasks/min with 4 workers vs 1",
        "scaling_4_vs_1_workers",
        ">=",
        3.0,
        "×",
        source="issue 29",
    ),
    Target(
        "cluster",
        "make cluster, 100 sockets on 2 web: first event (p50)",
        "first_event_p50_s",
        "<=",
        0.3,
        "s",
        source="issue 29",
    ),
    Target(
        "cluster",
        "3 workers, 1 busy workspace: others' start, vs without it (p95)",
        "busy_workspace.others_start_p95_s",
        "<=",
        unit="s",
        limit_path="busy_workspace.alone_start_p95_s",
        offset=1.0,
        source="issue 41",
    ),
    Target(
        "events",
        "2M event rows on PostgreSQL: chat replay of a task (p95)",
        "before_retention.replay_ms.p95",
        "<=",
        200,
        "ms",
        source="issue 41",
    ),
    Target(
        "events",
        "2M event rows on PostgreSQL: dashboard pages (worst p95)",
        "before_retention.pages_p95_max_ms",
        "<=",
        200,
        "ms",
        source="issue 41",
    ),
    Target(
        "events",
        "after retention: chat replay of a task (p95)",
        "after_retention.replay_ms.p95",
        "<=",
        200,
        "ms",
        source="issue 41",
    ),
    Target(
        "events",
        "after retention: dashboard pages (worst p95)",
        "after_retention.pages_p95_max_ms",
        "<=",
        200,
        "ms",
        source="issue 41",
    ),
)


@dataclass(frozen=True, slots=True)
class Row:
    target: Target
    figure: float | None
    limit: float | None
    status: str  # MET, MISSED, NOT_RUN, NO_FIGURE
    when: str = ""  # when the results file was written


def lookup(figures: dict[str, Any], path: str) -> Any:
    """figures["a"]["b"] for "a.b"; None when a key is missing."""
    value: Any = figures
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def load(results: Path, benchmark: str) -> dict[str, Any] | None:
    """The results file of `benchmark`, or None when there is none (or it is unreadable)."""
    try:
        return json.loads((results / f"{benchmark}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def evaluate(
    results: Path = RESULTS,
    targets: tuple[Target, ...] = TARGETS,
    benchmarks: list[str] | None = None,
) -> list[Row]:
    """One row per target (of `benchmarks` only, when given), from the files in `results`."""
    rows = []
    for target in targets:
        if benchmarks is not None and target.benchmark not in benchmarks:
            continue
        payload = load(results, target.benchmark)
        if payload is None:
            rows.append(Row(target, None, target.limit_for({}), NOT_RUN))
            continue
        figures = payload.get("figures") or {}
        value, limit = lookup(figures, target.path), target.limit_for(figures)
        when = str(payload.get("when", ""))
        if not _is_number(value) or limit is None:
            rows.append(Row(target, None, limit, NO_FIGURE, when))
            continue
        figure = value * target.scale
        met = COMPARE[target.op](figure, limit)
        rows.append(Row(target, figure, limit, MET if met else MISSED, when))
    return rows


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    text = (
        f"{value:.2f}"
        if abs(value) < 10
        else f"{value:.1f}"
        if abs(value) < 1000
        else f"{value:.0f}"
    )
    return f"{text}{unit}" if unit in ("", "%", "×") else f"{text} {unit}"


def _limit(row: Row) -> str:
    target = row.target
    if row.limit is None and target.limit_path is not None:  # not known without the results
        return f"{target.op} {target.limit_path} + {target.offset:g} {target.unit}".rstrip()
    return f"{target.op} {_number(row.limit, target.unit)}"


def render(rows: list[Row], durations: dict[str, float] | None = None) -> str:
    """The table: benchmark, figure, value, target, status (and how long each benchmark took)."""
    durations = durations or {}
    header = ("benchmark", "figure", "value", "target", "status")
    lines = [
        (
            row.target.benchmark,
            row.target.label,
            _number(row.figure, row.target.unit),
            _limit(row),
            row.status,
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    out = ["  ".join(cell.ljust(width) for cell, width in zip(header, widths, strict=True))]
    out.append("  ".join("-" * width for width in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    counts = {status: sum(row.status == status for row in rows) for status in (MET, MISSED)}
    missing = sum(row.status in (NOT_RUN, NO_FIGURE) for row in rows)
    out.append(
        f"{counts[MET]} met, {counts[MISSED]} missed, {missing} not run or without the figure"
    )
    if durations:
        took = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in durations.items())
        out.append(f"took {sum(durations.values()):.0f} s in all: {took}")
    return "\n".join(out)
