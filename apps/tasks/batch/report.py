"""The results of a batch run: the summary table, the JSON report (--report) and JUnit XML
(--junit), all from the same outcomes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from apps.tasks.batch.outcomes import NOT_STARTED, Outcome
from apps.tasks.batch.running import BatchRun
from apps.tasks.selectors import outcome_words

COLUMNS = (
    "id",
    "status",
    "outcome",
    "steps",
    "tokens",
    "cached",
    "cost",
    "time",
    "verification",
    "refl.",
    "expected",
)


def _verification_cell(outcome: Outcome) -> str:
    # One mark per verification in order: "✗✓" failed once, then passed.
    return "".join("✓" if passed else "✗" for passed in outcome.verification) or "—"


def _expected_cell(outcome: Outcome) -> str:
    if outcome.expectation_met is None:
        return "—"
    return "ok" if outcome.expectation_met else "MISMATCH"


def _row(outcome: Outcome) -> list[str]:
    return [
        outcome.id,
        outcome.status,
        outcome_words(outcome.outcome) or "—",
        str(outcome.steps),
        f"{outcome.tokens:,}",
        f"{outcome.cache_read_tokens:,}",
        f"${outcome.cost:.4f}",
        f"{outcome.duration_s:.1f} s" if outcome.duration_s is not None else "—",
        _verification_cell(outcome),
        str(outcome.reflections),
        _expected_cell(outcome),
    ]


def summary(run: BatchRun) -> dict:
    outcomes = run.outcomes
    judged = [o for o in outcomes if o.expectation_met is not None]
    return {
        "tasks": len(outcomes),
        "statuses": dict(sorted(Counter(o.status for o in outcomes).items())),
        "expectations": {
            "checked": len(judged),
            "met": sum(1 for o in judged if o.expectation_met),
        },
        "tokens": sum(o.tokens for o in outcomes),
        "cache_read_tokens": sum(o.cache_read_tokens for o in outcomes),
        "cost": round(sum(o.cost for o in outcomes), 6),
        "wall_seconds": run.wall_seconds,
    }


def all_as_expected(run: BatchRun) -> bool:
    return all(o.expectation_met is not False for o in run.outcomes)


def render_table(run: BatchRun) -> str:
    rows = [list(COLUMNS), *(_row(o) for o in run.outcomes)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    numeric = {2, 3, 4, 5, 6, 8}

    def line(row: list[str]) -> str:
        cells = [
            cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        return "  ".join(cells).rstrip()

    out = [line(rows[0]), "  ".join("─" * w for w in widths)]
    out += [line(row) for row in rows[1:]]
    totals = summary(run)
    statuses = ", ".join(f"{count} {status}" for status, count in totals["statuses"].items())
    expected = totals["expectations"]
    out.append("")
    out.append(
        f"{totals['tasks']} tasks: {statuses} · expected outcomes {expected['met']}/"
        f"{expected['checked']} · {totals['tokens']:,} tokens ({totals['cache_read_tokens']:,} "
        f"cached) · ${totals['cost']:.4f} · wall {run.wall_seconds:.1f} s"
    )
    for outcome in run.outcomes:
        for mismatch in outcome.mismatches:
            out.append(f"  {outcome.id}: {mismatch}")
    return "\n".join(out)


def report_data(run: BatchRun) -> dict:
    return {
        "suite": str(run.suite.path),
        "label": run.label,
        "executor": run.options.executor,
        "concurrency": run.options.concurrency,
        "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "interrupted": run.interrupted,
        "summary": summary(run),
        "tasks": [o.as_dict() for o in run.outcomes],
    }


def write_json(run: BatchRun, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report_data(run), indent=2, sort_keys=True) + "\n")
    return path


def write_junit(run: BatchRun, path: Path) -> Path:
    """One <testcase> per task: a <failure> when its expected outcome did not hold (or, with no
    expectation, when it did not complete), <skipped> when it never ran or was cancelled."""
    name = run.suite.path.stem
    suite = ET.Element(
        "testsuite",
        name=name,
        tests=str(len(run.outcomes)),
        time=f"{run.wall_seconds:.3f}",
        timestamp=run.started_at.isoformat(),
    )
    failures = skipped = 0
    for outcome in run.outcomes:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"agentkit.batch.{name}",
            name=outcome.id,
            time=f"{outcome.duration_s or 0.0:.3f}",
        )
        if outcome.status in (NOT_STARTED, "cancelled"):
            skipped += 1
            ET.SubElement(case, "skipped", message=f"task {outcome.status}")
        elif outcome.expectation_met is False or (
            outcome.expectation_met is None and outcome.status != "completed"
        ):
            failures += 1
            message = "; ".join(outcome.mismatches) or f"status {outcome.status}"
            failure = ET.SubElement(case, "failure", message=message, type=outcome.status)
            failure.text = (outcome.error or {}).get("message") or outcome.answer[:2000]
        out = ET.SubElement(case, "system-out")
        out.text = json.dumps(outcome.as_dict(), sort_keys=True)
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    root = ET.Element("testsuites", name="agentkit run_tasks")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path
