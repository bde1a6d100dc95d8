"""Stores an evaluation run (`run_tasks --suite`) for the Evaluations page: what ran, the
per-mode summary and one row per task, mode and repeat (the report's rows, trimmed to what the
page shows)."""

from __future__ import annotations

from datetime import UTC, datetime

from apps.tasks.batch.evaluation import Evaluation, mode_summary
from apps.tasks.models import EvaluationRun

# Per row: what the page's table and charts read; answers and events stay in the Task rows.
ROW_FIELDS = (
    "id",
    "task_id",
    "status",
    "hidden_tests",
    "solved",
    "model",
    "cost",
    "tokens",
    "steps",
    "duration_s",
    "detail",
)


def evaluation_rows(ev: Evaluation) -> list[dict]:
    rows = []
    for mode, repeat, run in ev.runs:
        for outcome in run.outcomes:
            data = outcome.as_dict()
            rows.append({"mode": mode, "repeat": repeat, **{k: data[k] for k in ROW_FIELDS}})
    return rows


def evaluation_run_record(*, ev: Evaluation, user, model: str = "") -> EvaluationRun:
    """One EvaluationRun for `ev` (interrupted or not). `model`: the alias the run was given;
    empty: the models its tasks ran on."""
    rows = evaluation_rows(ev)
    now = datetime.now(UTC)
    started = min((run.started_at for _, _, run in ev.runs), default=now)
    finished = max((run.finished_at or now for _, _, run in ev.runs), default=now)
    models = sorted({row["model"] for row in rows if row["model"]})
    return EvaluationRun.objects.create(
        user=user,
        suite=ev.suite,
        modes=list(ev.modes),
        model=(model or ", ".join(models))[:200],
        repeat=ev.repeat,
        started_at=started,
        finished_at=finished,
        interrupted=ev.interrupted,
        summary={mode: mode_summary(ev, mode) for mode in ev.modes},
        outcomes=rows,
    )
