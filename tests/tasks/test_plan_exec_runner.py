"""@plan through the runner on the demo workspace (seed 000 AE1): real tools, pytest + ruff in the
sandbox at the final answer, the shipped scripted model. Verification fails, the failure is
re-injected, fails again, the model reflects, the fix passes; the variant that never passes ends
gave_up_after_reflections on the Task row and in the API."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from apps.tasks.models import Task
from apps.tasks.run.runner import run_task
from tests.config_text import without_spec_review
from tests.support import ROOT
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)

GOAL = "fix the failing test in tests/test_slug.py"
GIVES_UP = ROOT / "apps" / "engine" / "llm" / "scripts" / "plan_exec_gives_up.yaml"


async def test_plan_task_fails_verification_reflects_retries_and_passes(demo, config_file):
    user, workspace, root = demo
    config_file(without_spec_review((ROOT / "agentkit.yaml").read_text()))  # tests/specs: gate
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="plan_exec")
    assert await run_task(task.pk) == "completed"

    assert 'r"[^a-zA-Z0-9]+"' in (root / "textkit" / "slug.py").read_text()
    events = await sync_to_async(events_of)(task)
    kinds = [e.type for e in events]
    assert "advance_phase" in events[0].data["tools"] or kinds.count("phase_changed") >= 2
    changes = [
        (e.data["previous"], e.data["phase"], e.data["reason"])
        for e in events
        if e.type == "phase_changed"
    ]
    assert changes[:2] == [("planning", "building", "tool"), ("building", "verification", "tool")]
    assert ("verification", "building", "retry") in changes
    results = [e.data for e in events if e.type == "verification_result"]
    assert [(r["passed"], r["reinjected"]) for r in results] == [
        (False, True),
        (False, False),
        (True, False),
    ]
    assert results[0]["commands"] == ["pytest -x -q", "ruff check"]
    assert "test_runs_of_separators_collapse" in results[0]["log"]
    reflections = [e.data for e in events if e.type == "reflection"]
    assert len(reflections) == 1 and reflections[0]["ok"] is True
    assert "[^a-zA-Z0-9]+" in reflections[0]["text"]
    # the reflection happens after the second failure and before the fix that passes
    assert (
        kinds.index("reflection")
        > [i for i, k in enumerate(kinds) if k == "verification_result"][1]
    )
    finished = events[-1].data
    assert finished["status"] == "completed"
    assert finished["phases"]["reflect_used"] == 1 and finished["phases"]["round"] == 3
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert row.status == "completed"


async def test_plan_task_that_never_passes_gives_up_after_reflections(demo, config_file, client):
    user, workspace, _ = demo
    shipped = without_spec_review((ROOT / "agentkit.yaml").read_text())
    config_file(
        shipped.replace("    chunk_delay_ms: 25", f"    script: {json.dumps(str(GIVES_UP))}")
    )
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="plan_exec")
    assert await run_task(task.pk) == "gave_up_after_reflections"

    events = await sync_to_async(events_of)(task)
    kinds = [e.type for e in events]
    assert kinds[-2:] == ["error", "task_finished"]
    assert kinds.count("verification_result") == 3 and kinds.count("reflection") == 1
    violation = next(e.data for e in events if e.type == "phase_violation")
    assert (violation["tool"], violation["phase"]) == ("shell", "planning")
    assert "read-only" in violation["message"]
    assert [e.data["budget"] for e in events if e.type == "budget_exhausted"] == ["reflect"]
    finished = events[-1].data
    assert finished["status"] == "gave_up_after_reflections"
    assert finished["error"]["error_code"] == "gave_up_after_reflections"
    assert "test_runs_of_separators_collapse" in finished["verification"][-1]["log"]
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert row.status == "gave_up_after_reflections" and row.finished_at
    assert row.error["error_code"] == "gave_up_after_reflections"

    await sync_to_async(client.force_login)(user)
    response = await sync_to_async(client.get)(f"/api/tasks/{task.pk}")
    assert response.status_code == 200
    assert response.json()["status"] == "gave_up_after_reflections"
