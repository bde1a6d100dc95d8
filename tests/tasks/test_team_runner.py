"""@team through the runner (seed 000 U9, R7) on the demo workspace with the shipped scripted
model: the task's confirmed spec is run by the TeamOrchestrator — planner, coder, reviewer —
with real tools, verification of the last phase in the sandbox, checkpoints in the database, one
task lifecycle; a failure is surfaced, never a react fallback; a resumed task skips the phases
its checkpoints hold; `POST /api/tasks/<id>/resume` and `manage.py resume_task` refuse what
cannot resume."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from apps.engine.plan.spec import SpecDraft
from apps.specs.models import Checkpoint, Spec, SpecPhase
from apps.tasks.models import Task
from apps.tasks.run.runner import run_task
from tests.support import ROOT
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)

GOAL = "fix the failing test in tests/test_slug.py"
DRAFT = SpecDraft.model_validate(
    {
        "goal": GOAL,
        "phases": [
            {"id": "plan", "title": "Find the bug", "role": "planner"},
            {"id": "fix", "title": "Fix slugify", "role": "coder", "depends_on": ["plan"]},
            {"id": "review", "title": "Review", "role": "reviewer", "depends_on": ["fix"]},
        ],
        "verification_commands": [],
    }
)


def make_spec(task, draft=DRAFT, status="confirmed") -> Spec:
    spec = Spec.objects.create(
        task=task,
        workspace=task.workspace,
        revision=1,
        status=status,
        goal=draft.goal,
        draft=draft.model_dump(mode="json"),
    )
    for position, phase in enumerate(draft.phases):
        SpecPhase.objects.create(
            spec=spec, position=position, phase_id=phase.id, title=phase.title, role=phase.role
        )
    return spec


async def test_team_task_runs_its_spec_with_experts_and_completes(demo):
    user, workspace, root = demo
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="team_collab")
    spec = await sync_to_async(make_spec)(task)
    assert await run_task(task.pk) == "completed"

    assert 'r"[^a-zA-Z0-9]+"' in (root / "textkit" / "slug.py").read_text()
    events = await sync_to_async(events_of)(task)
    kinds = [e.type for e in events]
    assert kinds.count("task_started") == 1 and kinds.count("task_finished") == 1
    assert events[0].data["mode"] == "team_collab"
    assert [e.data["phase_id"] for e in events if e.type == "phase_completed"] == [
        "plan",
        "fix",
        "review",
    ]
    edits = [e for e in events if e.type == "tool_call" and e.data["name"] == "str_replace_editor"]
    assert [e.data["phase_id"] for e in edits] == ["fix"]  # the coder edited, nobody else
    verification = [e.data for e in events if e.type == "verification_result"]
    assert verification and verification[-1]["passed"] is True
    assert {e.data["phase_id"] for e in events if e.type == "verification_result"} == {"review"}
    rows = await sync_to_async(list)(
        Checkpoint.objects.filter(task=task).values_list("phase_id", "status")
    )
    assert rows == [("plan", "completed"), ("fix", "completed"), ("review", "completed")]
    spec_row = await sync_to_async(Spec.objects.get)(pk=spec.pk)
    assert spec_row.status == "done"
    phases = await sync_to_async(list)(spec_row.phases.values_list("status", flat=True))
    assert phases == ["completed"] * 3
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert row.status == "completed" and row.finished_at and row.usage["llm_calls"] == 4


async def test_team_task_failure_is_surfaced_never_run_as_react(demo, config_file):
    user, workspace, root = demo
    (root.parent / "broken.yaml").write_text("- {match: 'Your phase', fail: auth, repeat: true}\n")
    config_file(
        """
        models:
          main: {provider: scripted, script: broken.yaml}
        """
    )
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="team_collab")
    await sync_to_async(make_spec)(task)
    assert await run_task(task.pk) == "failed"
    events = await sync_to_async(events_of)(task)
    kinds = [e.type for e in events]
    assert kinds.count("task_started") == 1 and kinds[-2:] == ["error", "task_finished"]
    assert {e.data["mode"] for e in events if e.type == "task_started"} == {"team_collab"}
    failed = {e.data["phase_id"]: e.data for e in events if e.type == "phase_failed"}
    assert set(failed) == {"plan", "fix", "review"}
    assert failed["fix"]["failed_dependency"] == "plan"
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert row.status == "failed" and row.error["error_code"] == "phase_failed"
    assert 'r"[^a-zA-Z0-9]"' in (root / "textkit" / "slug.py").read_text()  # nothing ran


async def test_resumed_team_task_skips_the_phases_its_checkpoints_hold(demo):
    user, workspace, root = demo
    assert 'r"[^a-zA-Z0-9]"' in (root / "textkit" / "slug.py").read_text()
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="team_collab")
    spec = await sync_to_async(make_spec)(task, status="executing")
    await sync_to_async(Checkpoint.objects.create)(
        spec=spec,
        task=task,
        phase_id="plan",
        status="completed",
        counters={"final": "Plan: match whole runs.", "steps": 1, "usage": {"llm_calls": 1}},
    )
    await sync_to_async(Task.objects.filter(pk=task.pk).update)(status="running", last_seq=5)
    assert await run_task(task.pk) == "completed"
    events = await sync_to_async(events_of)(task)
    assert events[0].seq == 6  # the resumed run continues the task's events
    started = [e.data["phase_id"] for e in events if e.type == "phase_started"]
    assert started == ["fix", "review"]
    resumed = [e.data for e in events if e.type == "phase_completed" and e.data.get("resumed")]
    assert [d["phase_id"] for d in resumed] == ["plan"]
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert row.usage["llm_calls"] == 4  # the checkpoint's call counts with the three new ones


async def test_team_message_is_planned_reviewed_then_run_by_the_team(demo, client):
    """team_collab = planner -> spec -> review gate -> TeamOrchestrator, in one run."""
    user, workspace, root = demo
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="team_collab")
    run = asyncio.create_task(run_task(task.pk))
    deadline = time.monotonic() + 60
    while not [e for e in await sync_to_async(events_of)(task) if e.type == "spec_review_request"]:
        assert not run.done(), run.result()
        assert time.monotonic() < deadline, "no spec_review_request"
        await asyncio.sleep(0.1)
    request = next(
        e for e in await sync_to_async(events_of)(task) if e.type == "spec_review_request"
    )
    assert {p["role"] for p in request.data["spec"]["phases"]} == {"planner", "coder", "reviewer"}
    await sync_to_async(client.force_login)(user)
    reply = await sync_to_async(client.post)(
        f"/api/specs/{request.data['spec_id']}/review",
        data=json.dumps({"decision": "confirm"}),
        content_type="application/json",
    )
    assert reply.status_code == 200, reply.content
    assert await asyncio.wait_for(run, 120) == "completed"

    events = await sync_to_async(events_of)(task)
    kinds = [e.type for e in events]
    assert kinds.count("task_started") == 1 and kinds.count("task_finished") == 1
    assert kinds.index("spec_review_resolved") < kinds.index("phase_started")
    assert [e.data["phase_id"] for e in events if e.type == "phase_completed"] == [
        "analyse",
        "fix",
        "review",
    ]
    # the demo workspace is no git repository: the @snapshot rollback is flagged, not silent
    warnings = [e.data["error_struct"]["error_code"] for e in events if e.type == "error"]
    assert warnings == ["snapshot_unavailable"]
    assert 'r"[^a-zA-Z0-9]+"' in (root / "textkit" / "slug.py").read_text()
    spec = await sync_to_async(Spec.objects.get)(pk=request.data["spec_id"])
    assert spec.status == "done"
    row = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert row.status == "completed"
    assert row.usage["llm_calls"] == 5  # the planner's call, then 1 + 2 + 1 by the experts


def test_resume_is_refused_for_finished_live_and_non_team_tasks(demo, client):
    user, workspace, _ = demo
    client.force_login(user)
    done = make_task(user, workspace, goal=GOAL, mode="team_collab")
    Task.objects.filter(pk=done.pk).update(status="completed")
    react = make_task(user, workspace, goal=GOAL, mode="react")
    live = make_task(user, workspace, goal=GOAL, mode="team_collab")
    make_spec(live, status="executing")
    Task.objects.filter(pk=live.pk).update(  # its run's heartbeat: just now
        status="running", run_owner="host:1:run", heartbeat_at=timezone.now()
    )
    for task, code in ((done, "not_resumable"), (react, "not_resumable"), (live, "task_alive")):
        response = client.post(f"/api/tasks/{task.pk}/resume")
        assert response.status_code == 400, response.content
        assert response.json()["error"]["code"] == code
    with pytest.raises(CommandError, match="still running"):
        call_command("resume_task", str(live.pk))
    with pytest.raises(CommandError, match="does not exist"):
        call_command("resume_task", "999999")


def test_an_interrupted_team_task_is_resumed_through_the_api_and_completes(demo, client):
    from datetime import timedelta

    from django.utils import timezone

    user, workspace, _ = demo
    client.force_login(user)
    task = make_task(user, workspace, goal=GOAL, mode="team_collab")
    make_spec(task, status="executing")
    stale = timezone.now() - timedelta(seconds=60)
    Task.objects.filter(pk=task.pk).update(status="running", run_owner="h:1:r", heartbeat_at=stale)
    assert client.get(f"/api/tasks/{task.pk}").json()["resumable"] is True
    response = client.post(f"/api/tasks/{task.pk}/resume")
    assert response.status_code == 202 and response.json()["resumed"] is True
    # claimed: a second resume right away is refused
    assert client.post(f"/api/tasks/{task.pk}/resume").json()["error"]["code"] == "task_alive"
    deadline = time.monotonic() + 90
    while Task.objects.get(pk=task.pk).status not in ("completed", "failed"):
        assert time.monotonic() < deadline, "the resumed task did not finish"
        time.sleep(0.2)
    assert Task.objects.get(pk=task.pk).status == "completed"
    assert client.get(f"/api/tasks/{task.pk}").json()["resumable"] is False


async def test_team_spec_review_timeout_parks_the_task_and_runs_no_phase(demo, config_file):
    user, workspace, root = demo
    shipped = (ROOT / "agentkit.yaml").read_text()
    parked_soon = shipped.replace("timeout_seconds: 1800 ", "timeout_seconds: 0.5  ")
    assert parked_soon != shipped
    config_file(parked_soon)
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="team_collab")
    assert await run_task(task.pk) == "parked"
    events = await sync_to_async(events_of)(task)
    kinds = [e.type for e in events]
    assert kinds.count("task_started") == 1 and kinds[-1] == "task_finished"
    assert events[-1].data["status"] == "parked"
    resolved = [e.data["decision"] for e in events if e.type == "spec_review_resolved"]
    assert resolved == ["timed_out"]
    assert "phase_started" not in kinds and "error" not in kinds
    assert 'r"[^a-zA-Z0-9]"' in (root / "textkit" / "slug.py").read_text()


async def test_a_failed_phase_rolls_back_in_the_sandbox_and_no_internal_path_reaches_events(
    demo, config_file
):
    user, workspace, root = demo
    (root.parent / "broken.yaml").write_text("- {match: 'Your phase', fail: auth, repeat: true}\n")
    config_file(
        """
        models:
          main: {provider: scripted, script: broken.yaml}
        rollback: {timeout_seconds: 30}
        """
    )
    draft = SpecDraft.model_validate(
        {
            "goal": GOAL,
            "phases": [
                {
                    "id": "fix",
                    "title": "Fix slugify",
                    "validation_command": "false",
                    "rollback_command": "pwd; id -u; exit 3",
                }
            ],
        }
    )
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="team_collab")
    await sync_to_async(make_spec)(task, draft)
    assert await run_task(task.pk) == "failed"
    events = await sync_to_async(events_of)(task)
    failed = next(e.data for e in events if e.type == "phase_rollback_failed")
    assert failed["exit_code"] == 3 and failed["checkpoint_saved"] is False
    assert "<path>" in failed["output"] and "1000" in failed["output"]  # the sandbox's user
    assert all(str(root) not in json.dumps(e.data) for e in events)
    assert not await sync_to_async(Checkpoint.objects.filter(task=task).exists)()


async def test_a_team_that_cannot_be_built_fails_clearly_and_never_runs_as_react(demo):
    """Seed 000 U9: the orchestrator unavailable (here: its workspace is gone) is surfaced."""
    import shutil

    user, workspace, root = demo
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="team_collab")
    shutil.rmtree(root)
    assert await run_task(task.pk) == "failed"
    events = await sync_to_async(events_of)(task)
    assert [e.type for e in events] == ["task_started", "error", "task_finished"]
    assert events[0].data["mode"] == "team_collab"
    assert events[1].data["error_struct"]["error_code"] == "workspace_missing"
