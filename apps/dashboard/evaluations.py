"""The Evaluations page's data: the stored `run_tasks --suite` runs a user may see (those that
ran as them, like the dashboard's tasks of their own workspaces), one run's per-mode charts
(solved %, cost per solved task) and its per-task table (each mode's outcome per repeat)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from apps.dashboard import charts
from apps.dashboard.charts import Series
from apps.dashboard.figures import Chart
from apps.tasks.models import EvaluationRun

SOLVED, UNSOLVED, COST = "#12b76a", "#f04438", "#2e90fa"


def evaluation_runs(*, user) -> QuerySet[EvaluationRun]:
    """The user's evaluation runs, newest first (the per-task rows left unread)."""
    return EvaluationRun.objects.filter(user=user).defer("outcomes").order_by("-started_at", "-id")


def evaluation_run(*, user, pk: int) -> EvaluationRun | None:
    return EvaluationRun.objects.filter(user=user, pk=pk).first()


def cost_per_solved(summary: dict) -> float | None:
    """A mode's cost divided by its solved runs (None when it solved none)."""
    solved = summary.get("solved") or 0
    return summary.get("cost", 0.0) / solved if solved else None


def evaluation_charts(run: EvaluationRun) -> list[Chart]:
    modes = list(run.modes)
    summaries = [run.summary.get(mode, {}) for mode in modes]
    solved = [s.get("solved_pct", 0.0) / 100 if s.get("runs") else None for s in summaries]
    counts = [f"{s.get('solved', 0)}/{s.get('runs', 0)} solved" for s in summaries]
    per_solved = [cost_per_solved(s) for s in summaries]
    costs = [f"${s.get('cost', 0.0):.4f} for {s.get('solved', 0)} solved" for s in summaries]
    return [
        Chart(
            "chart-eval-solved",
            "Solved per mode",
            "Share of the task runs whose hidden tests passed (all repeats together).",
            charts.stacked_bars(
                chart_id="chart-eval-solved",
                title="Solved % per mode",
                categories=modes,
                series=[
                    Series("solved", solved, SOLVED),
                    Series("not solved", [None if v is None else 1 - v for v in solved], UNSOLVED),
                ],
                y_label="task runs",
                x_label="Mode",
                fmt=charts.percent,
                hover=counts,
                empty="No task of this run ended.",
            ),
        ),
        Chart(
            "chart-eval-cost",
            "Cost per solved task",
            "The mode's whole cost divided by the tasks it solved; no bar: nothing solved.",
            charts.stacked_bars(
                chart_id="chart-eval-cost",
                title="Cost per solved task per mode",
                categories=modes,
                series=[Series("cost per solved task", per_solved, COST)],
                y_label="US dollars",
                x_label="Mode",
                fmt=charts.dollars,
                hover=costs,
                # Short enough for the chart's width at the empty message's size.
                empty="No cost to show: no price for these models, or nothing solved.",
            ),
        ),
    ]


@dataclass(frozen=True)
class Cell:
    """One run of a task in one mode: its Task (None: never started) and how it ended."""

    task_id: int | None
    repeat: int
    solved: bool
    status: str
    hidden_tests: str
    detail: str

    @property
    def title(self) -> str:
        tail = f": {self.detail}" if self.detail else ""
        return f"run {self.repeat} · {self.status} · hidden tests {self.hidden_tests}{tail}"


@dataclass(frozen=True)
class TableRow:
    task: str
    cells: list[list[Cell]]  # per mode (the run's order), one cell per repeat


def evaluation_table(run: EvaluationRun) -> list[TableRow]:
    """Per task, in the suite's order, each mode's outcome in every repeat."""
    by_task: dict[str, dict[str, list[Cell]]] = {}
    for row in run.outcomes:
        cell = Cell(
            task_id=row.get("task_id"),
            repeat=row.get("repeat", 1),
            solved=bool(row.get("solved")),
            status=row.get("status", ""),
            hidden_tests=row.get("hidden_tests", "not_run"),
            detail=row.get("detail", ""),
        )
        by_task.setdefault(row["id"], {}).setdefault(row["mode"], []).append(cell)
    return [
        TableRow(
            task,
            [sorted(by_mode.get(mode, []), key=lambda c: c.repeat) for mode in run.modes],
        )
        for task, by_mode in by_task.items()
    ]


def summary_rows(run: EvaluationRun) -> list[dict]:
    """Per mode what `run_tasks` prints in its summary table, ready to show."""
    rows = []
    for mode in run.modes:
        s = run.summary.get(mode, {})
        per_solved = cost_per_solved(s)
        rows.append(
            {
                "mode": mode,
                "solved": f"{s.get('solved', 0)}/{s.get('runs', 0)}",
                "solved_pct": s.get("solved_pct", 0.0),
                "pass_at_1": s.get("pass_at_1", 0.0),
                "pass_at_k": s.get(f"pass_at_{run.repeat}") if run.repeat > 1 else None,
                "cost": charts.dollars(s.get("cost", 0.0)),
                "cost_per_solved": "—" if per_solved is None else charts.dollars(per_solved),
                "tokens_uncached": f"{s.get('tokens_uncached', 0):,}",
                "tokens_cached": f"{s.get('tokens_cached', 0):,}",
                "wall_seconds": s.get("wall_seconds", 0.0),
                "steps": s.get("steps", 0),
                "verification_attempts": s.get("verification_attempts", 0),
                "reflections": s.get("reflections", 0),
            }
        )
    return rows
