"""An evaluation run (`run_tasks --suite humaneval [--compare M1,M2] [--repeat K]`): every task
of a built-in suite in each mode, K times, each run in fresh workspaces, scored by the suite's
hidden tests; one report.

The report (`--report out.json`): `tasks[]` holds one row per task, mode and repeat (the batch
report's row, with `mode`, `repeat`, `model`, `hidden_tests`, `solved`); `modes` per mode:
solved %, pass@1 and pass@K (Chen et al.'s unbiased estimator over the K tries), the spread of
solved % over repeats, tokens cached/uncached, cost, wall time, steps, verification attempts,
reflections. `problems` per task and mode: solved in each repeat.

`--baseline old.json` compares per task and mode with an earlier report: a task counts as solved
when it was solved in at least half of its repeats.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from math import comb
from pathlib import Path
from statistics import pstdev

from apps.tasks.batch.running import BatchRun


@dataclass
class Evaluation:
    suite: str
    modes: list[str]
    repeat: int = 1
    runs: list[tuple[str, int, BatchRun]] = field(default_factory=list)  # (mode, repeat, run)

    @property
    def interrupted(self) -> bool:
        return any(run.interrupted for _, _, run in self.runs)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k tries out of n (c correct) solves it (Chen et al.)."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def _solved_matrix(ev: Evaluation) -> dict[str, dict[str, list[bool]]]:
    """task id → mode → solved per repeat."""
    matrix: dict[str, dict[str, list[bool]]] = {}
    for mode, _, run in ev.runs:
        for outcome in run.outcomes:
            matrix.setdefault(outcome.id, {}).setdefault(mode, []).append(bool(outcome.solved))
    return matrix


def mode_summary(ev: Evaluation, mode: str) -> dict:
    runs = [run for m, _, run in ev.runs if m == mode]
    outcomes = [o for run in runs for o in run.outcomes]
    matrix = {
        task: by_mode[mode] for task, by_mode in _solved_matrix(ev).items() if mode in by_mode
    }
    tasks = len(matrix) or 1
    per_repeat = [
        100.0 * sum(bool(o.solved) for o in run.outcomes) / max(len(run.outcomes), 1)
        for run in runs
    ]
    solved = sum(bool(o.solved) for o in outcomes)
    return {
        "tasks": len(matrix),
        "runs": len(outcomes),
        "solved": solved,
        "solved_pct": round(100.0 * solved / max(len(outcomes), 1), 1),
        "pass_at_1": round(sum(pass_at_k(len(v), sum(v), 1) for v in matrix.values()) / tasks, 4),
        f"pass_at_{ev.repeat}": round(
            sum(pass_at_k(len(v), sum(v), ev.repeat) for v in matrix.values()) / tasks, 4
        ),
        "spread_pct": {
            "min": round(min(per_repeat, default=0.0), 1),
            "max": round(max(per_repeat, default=0.0), 1),
            "stdev": round(pstdev(per_repeat), 2) if len(per_repeat) > 1 else 0.0,
        },
        "tokens_uncached": sum(o.tokens - o.cache_read_tokens for o in outcomes),
        "tokens_cached": sum(o.cache_read_tokens for o in outcomes),
        "cost": round(sum(o.cost for o in outcomes), 6),
        "wall_seconds": round(sum(run.wall_seconds for run in runs), 3),
        "steps": sum(o.steps for o in outcomes),
        "verification_attempts": sum(len(o.verification) for o in outcomes),
        "reflections": sum(o.reflections for o in outcomes),
        "statuses": _count(o.status for o in outcomes),
        "models": sorted({o.model for o in outcomes if o.model}),
    }


def _count(values) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def report_data(ev: Evaluation) -> dict:
    rows = [
        {**o.as_dict(), "mode": mode, "repeat": repeat}
        for mode, repeat, run in ev.runs
        for o in run.outcomes
    ]
    return {
        "suite": ev.suite,
        "modes": {mode: mode_summary(ev, mode) for mode in ev.modes},
        "repeat": ev.repeat,
        "labels": [run.label for _, _, run in ev.runs],
        "interrupted": ev.interrupted,
        "problems": _solved_matrix(ev),
        "tasks": rows,
    }


def write_json(ev: Evaluation, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report_data(ev), indent=2, sort_keys=True) + "\n")
    return path


def _cell(values: list[bool]) -> str:
    return "".join("✓" if v else "✗" for v in values) or "—"


def render(ev: Evaluation) -> str:
    """Per task the outcome in each mode (one mark per repeat), then per mode its summary."""
    matrix = _solved_matrix(ev)
    head = ["task", *ev.modes]
    rows = [head, *([task, *(_cell(by.get(m, [])) for m in ev.modes)] for task, by in
                    matrix.items())]  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    out = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    out.insert(1, "  ".join("─" * w for w in widths))
    out += ["", summary_table(ev)]
    return "\n".join(out)


def summary_table(ev: Evaluation) -> str:
    """The per-mode table (also the README's sample)."""
    k = ev.repeat
    head = ["mode", "solved", "pass@1", *([f"pass@{k}"] if k > 1 else []), "tokens uncached",
            "cached", "cost", "wall", "steps", "verif.", "refl."]  # fmt: skip
    rows = [head]
    for mode in ev.modes:
        s = mode_summary(ev, mode)
        rows.append(
            [
                mode,
                f"{s['solved']}/{s['runs']} ({s['solved_pct']:g} %)",
                f"{s['pass_at_1']:.3f}",
                *([f"{s[f'pass_at_{k}']:.3f}"] if k > 1 else []),
                f"{s['tokens_uncached']:,}",
                f"{s['tokens_cached']:,}",
                f"${s['cost']:.4f}",
                f"{s['wall_seconds']:.1f} s",
                str(s["steps"]),
                str(s["verification_attempts"]),
                str(s["reflections"]),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(widths[i]) for i, c in enumerate(r)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    if k > 1:
        spreads = ", ".join(
            f"{m} {mode_summary(ev, m)['spread_pct']['min']:g}–"
            f"{mode_summary(ev, m)['spread_pct']['max']:g} %"
            for m in ev.modes
        )
        lines.append(f"solved % over {k} repeats: {spreads}")
    return "\n".join(lines)


class BaselineError(Exception):
    pass


def load_baseline(path: Path) -> dict[str, dict[str, list[bool]]]:
    """task id → mode → solved per repeat, from an earlier `--report` of a suite run."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"--baseline {path}: cannot read it as JSON ({exc})") from None
    problems = data.get("problems") if isinstance(data, dict) else None
    if not isinstance(problems, dict):
        raise BaselineError(
            f"--baseline {path}: not a suite report (no `problems`); pass the --report file of "
            "an earlier `run_tasks --suite` run"
        )
    return problems


def _majority(values: list[bool]) -> bool:
    return bool(values) and 2 * sum(bool(v) for v in values) >= len(values)


def baseline_changes(ev: Evaluation, old: dict[str, dict[str, list[bool]]]) -> dict:
    newly_solved, newly_failed = [], []
    for task, by_mode in _solved_matrix(ev).items():
        for mode, values in by_mode.items():
            before = (old.get(task) or {}).get(mode)
            if before is None:
                continue
            if _majority(values) and not _majority(before):
                newly_solved.append(f"{task} ({mode})")
            elif not _majority(values) and _majority(before):
                newly_failed.append(f"{task} ({mode})")
    return {"newly_solved": newly_solved, "newly_failed": newly_failed}


def render_changes(changes: dict) -> str:
    lines = []
    for key, title in (("newly_solved", "newly solved"), ("newly_failed", "newly failed")):
        items = changes[key]
        lines.append(f"{title} ({len(items)}): {', '.join(items) if items else 'none'}")
    return "\n".join(lines)
