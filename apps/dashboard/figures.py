"""DashboardData → the page's charts (SVG strings), with the labels and colours people read."""

from __future__ import annotations

from dataclasses import dataclass

from apps.dashboard import charts
from apps.dashboard.charts import Series
from apps.dashboard.selectors import DashboardData

STATUS_COLORS = {
    "completed": "#12b76a",
    "failed": "#f04438",
    "gave_up_after_reflections": "#b42318",
    "cancelled": "#98a2b3",
    "parked": "#fdb022",
    "awaiting_review": "#7a5af8",
    "running": "#2e90fa",
    "queued": "#b2ddff",
}
VERIFICATION_LABELS = {
    "first_try": ("passed first try", "#12b76a"),
    "after_reinjection": ("passed after re-injection", "#2e90fa"),
    "after_reflection": ("passed after reflection", "#7a5af8"),
    "failed": ("never passed", "#f04438"),
}
PITFALL_LABELS = {
    "completed": ("task completed", "#12b76a"),
    "failed": ("task failed or gave up", "#f04438"),
    "other": ("running or cancelled", "#98a2b3"),
}
GOAL_CHARS = 80


@dataclass(frozen=True)
class Chart:
    id: str
    heading: str
    explanation: str
    svg: str


def _day_labels(data: DashboardData) -> list[str]:
    return [day.strftime("%m-%d") for day in data.days]


def _goal(goal: str) -> str:
    goal = " ".join(goal.split())
    return goal if len(goal) <= GOAL_CHARS else goal[: GOAL_CHARS - 1] + "…"


def _nonzero(series: list[Series]) -> list[Series]:
    """Only the series with a value somewhere: a legend of eight statuses, most of them 0,
    says less than one of the three that happened."""
    return [s for s in series if any(s.values)] or series[:1]


def _pass_rates(verification: dict[str, list[int]]) -> list[str]:
    """Per day: "2 of 3 passed (67%)", for the verification bars' titles."""
    rates = []
    for i, failed in enumerate(verification["failed"]):
        total = sum(values[i] for values in verification.values())
        passed = total - failed
        rates.append(f"{passed} of {total} passed ({passed / total:.0%})" if total else "")
    return rates


def dashboard_charts(data: DashboardData) -> list[Chart]:
    days = _day_labels(data)
    recent = data.recent
    task_labels = [f"#{t.id}" for t in recent]
    goals = [f"{_goal(t.goal)} ({t.status})" for t in recent]
    return [
        Chart(
            "outcomes",
            "Outcomes over time",
            "Tasks started per day, stacked by where they ended (or stand now).",
            charts.stacked_bars(
                chart_id="chart-outcomes",
                title="Tasks per day by final status",
                categories=days,
                series=_nonzero(
                    [
                        Series(status, values, STATUS_COLORS[status])
                        for status, values in data.outcomes.items()
                    ]
                ),
                y_label="tasks",
                x_label="Day",
            ),
        ),
        Chart(
            "tokens",
            "Tokens per task",
            f"The last {len(recent)} tasks: prompt tokens read from the cache, the other "
            "prompt tokens, and output tokens.",
            charts.stacked_bars(
                chart_id="chart-tokens",
                title="Tokens per task",
                categories=task_labels,
                series=[
                    Series("cached prompt", [t.cache_read_tokens for t in recent], "#7a5af8"),
                    Series("uncached prompt", [t.uncached_input_tokens for t in recent], "#2e90fa"),
                    Series("output", [t.output_tokens for t in recent], "#fdb022"),
                ],
                y_label="tokens",
                x_label="Task",
                hover=goals,
                empty="No task has used tokens yet." if recent else charts.EMPTY,
            ),
        ),
        Chart(
            "cost",
            "Cost per task",
            f"The last {len(recent)} tasks, in US dollars at the configured prices (the offline "
            "scripted model costs nothing).",
            charts.stacked_bars(
                chart_id="chart-cost",
                title="Cost per task",
                categories=task_labels,
                series=[Series("cost", [t.cost for t in recent], "#12b76a")],
                y_label="USD",
                x_label="Task",
                fmt=charts.dollars,
                hover=goals,
                empty="No task has cost anything yet." if recent else charts.EMPTY,
            ),
        ),
        Chart(
            "cache",
            "Prompt-cache hit rate",
            "Per day: the share of prompt tokens read from the prompt cache.",
            charts.line_chart(
                chart_id="chart-cache",
                title="Prompt-cache hit rate per day",
                categories=days,
                series=[Series("cache hit rate", data.cache_hit_rate, "#7a5af8")],
                y_label="hit rate",
                x_label="Day",
                fmt=charts.percent,
                y_max=1.0,
            ),
        ),
        Chart(
            "verification",
            "Verification",
            "Finished tasks that ran verification, per day: passed at the first attempt, after "
            "the errors were re-injected, after a reflection, or never.",
            charts.stacked_bars(
                chart_id="chart-verification",
                title="Verification outcome per day",
                categories=days,
                series=[
                    Series(label, data.verification[key], color)
                    for key, (label, color) in VERIFICATION_LABELS.items()
                ],
                y_label="tasks",
                x_label="Day",
                hover=_pass_rates(data.verification),
                empty="No finished task has run verification yet (plan_exec and team_collab do).",
            ),
        ),
        Chart(
            "pitfalls",
            "Pitfalls injected",
            "Pitfalls seen before that went into a task's prompt, per day, by how the task ended.",
            charts.stacked_bars(
                chart_id="chart-pitfalls",
                title="Pitfalls injected per day",
                categories=days,
                series=[
                    Series(label, data.pitfalls[key], color)
                    for key, (label, color) in PITFALL_LABELS.items()
                ],
                y_label="injections",
                x_label="Day",
                empty="No pitfall has been injected yet.",
            ),
        ),
    ]


def evolution_charts(*, by_day: list[dict], injections: dict[str, list[int]], days) -> dict:
    """The evolution dashboard's charts (admin): new pitfalls on the days that had any (the
    `by_day` rows of apps.evolution.selectors.evolution_dashboard), and injections per day."""
    rows = sorted(by_day, key=lambda row: row["day"])
    return {
        "by_day": charts.stacked_bars(
            chart_id="chart-new-pitfalls",
            title="New pitfalls per day",
            categories=[row["day"].strftime("%m-%d") for row in rows],
            series=[
                Series("active now", [row["active"] for row in rows], "#12b76a"),
                Series(
                    "candidate or retired",
                    [row["created"] - row["active"] for row in rows],
                    "#98a2b3",
                ),
            ],
            y_label="pitfalls",
            x_label="Day",
            empty="No pitfalls yet.",
        ),
        "injections": charts.stacked_bars(
            chart_id="chart-pitfalls",
            title="Pitfalls injected per day",
            categories=[day.strftime("%m-%d") for day in days],
            series=[
                Series(label, injections[key], color)
                for key, (label, color) in PITFALL_LABELS.items()
            ],
            y_label="injections",
            x_label="Day",
            empty="No pitfall has been injected yet.",
        ),
    }
