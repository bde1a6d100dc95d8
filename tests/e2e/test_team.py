"""team_collab in a real browser, on the demo workspace with the offline scripted model:
`@team ...` is planned, confirmed on its spec card and run by the team (board of phases, each
done); a team task whose process died mid-run (its spec executing, its heartbeat stale, phase 1
checkpointed) shows a Resume button that runs the remaining phases from the checkpoint, phase 1
not run again."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from tests.config_text import without_takeover
from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.e2e

DRAFT = {
    "goal": "fix the failing test in tests/test_slug.py",
    "phases": [
        {"id": "plan", "title": "Find the bug", "role": "planner"},
        {"id": "fix", "title": "Fix slugify", "role": "coder", "depends_on": ["plan"]},
        {"id": "review", "title": "Review", "role": "reviewer", "depends_on": ["fix"]},
    ],
}
INTERRUPTED = """
import json
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from apps.specs.models import Checkpoint, Spec, SpecPhase
from apps.tasks.models import Task, TaskEvent, Workspace
user = get_user_model().objects.get(username={user!r})
ws = Workspace.objects.get(name="demo")
draft = json.loads({draft!r})
task = Task.objects.create(workspace=ws, user=user, mode="team_collab", goal=draft["goal"],
                           status="running", started_at=timezone.now(), last_seq=1)
TaskEvent.objects.create(task=task, seq=1, type="task_started", ts=timezone.now(),
    data={{"mode": "team_collab", "goal": draft["goal"], "phases": ["plan", "fix", "review"]}})
spec = Spec.objects.create(task=task, workspace=ws, goal=draft["goal"], draft=draft,
                           status="executing")
for i, p in enumerate(draft["phases"]):
    SpecPhase.objects.create(spec=spec, position=i, phase_id=p["id"], title=p["title"], role=p["role"])
Checkpoint.objects.create(spec=spec, task=task, phase_id="plan", status="completed",
    counters={{"final": "Plan: match whole runs of separators.", "steps": 1, "usage": {{"llm_calls": 1}}}})
# No run ever claimed it (no heartbeat): interrupted, so resumable (apps/tasks/dispatch/liveness.py).
print(task.pk)
"""


@pytest.fixture
def demo_server(tmp_path):
    config = tmp_path / "agentkit.yaml"  # the interrupted task waits for the person's Resume
    config.write_text(without_takeover((ROOT / "agentkit.yaml").read_text()))
    with agentkit_server(tmp_path, AGENTKIT_CONFIG=str(config)) as server:
        yield server


def test_a_team_message_is_reviewed_then_run_by_the_team_phase_by_phase(
    page: Page, demo_server, artifacts
):
    log_in(page, demo_server)
    page.locator("#message").fill("@team fix the failing test in tests/test_slug.py")
    page.get_by_role("button", name="Send").click()
    task = page.locator("article.task").last
    card = task.locator(".spec-card")
    expect(card).to_contain_text("planner", timeout=TASK_MS)  # the phases' experts
    expect(card).to_contain_text("reviewer")
    board = task.locator("[data-role=team-board]")
    expect(board.locator("tr[data-state=pending]")).to_have_count(3)  # the spec's phases, waiting
    expect(board.locator("th")).to_have_text(["Phase", "Expert", "Status", "Time", "Check", ""])
    card.get_by_role("button", name="Confirm").click()
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    expect(task.locator(".task-title")).to_contain_text("Team")
    for phase in ("analyse", "fix", "review"):
        row = board.locator(f"tr[data-phase-id={phase}]")
        expect(row).to_have_attribute("data-state", "completed")
        expect(row.locator(".phase-status")).to_have_text("done")
        expect(row.locator(".phase-duration")).to_have_text(re.compile(r"^\d+ s$|min"))
    expect(board.locator("tr[data-phase-id=fix] .phase-role")).to_have_text("coder")
    # The board is a table in the task's sticky header: it stays in view while the body scrolls.
    assert board.evaluate("b => getComputedStyle(b.closest('.task-header')).position") == "sticky"
    board.locator("tr[data-phase-id=fix] [data-role=phase-events]").click()
    expect(task.locator(".note.team-note[data-phase-id=fix]").first).to_be_in_viewport()
    board.screenshot(path=str(artifacts / "chat-team-board.png"))
    expect(task).to_contain_text(
        "Phase fix (Make every run of non-alphanumeric characters one separator)"
    )
    expect(task.locator(".verify-card.ok")).to_have_count(1)
    # bootstrap made the demo a git repository: @snapshot can restore it, no warning
    expect(task).not_to_contain_text("snapshot_unavailable")


def test_an_interrupted_team_task_resumes_from_the_page_and_completes(page: Page, demo_server):
    made = demo_server.manage(
        "shell", "-c", INTERRUPTED.format(user=demo_server.username, draft=json.dumps(DRAFT))
    )
    task_id = int(made.stdout.strip().splitlines()[-1])
    log_in(page, demo_server)
    page.goto(f"{demo_server.url}/#task-{task_id}")
    task = page.locator(f"article.task[data-task-id='{task_id}']")
    expect(task.locator("[data-role=team-board] tbody tr")).to_have_count(3)
    resume = task.locator("button[data-role=resume-task]")
    expect(resume).to_be_visible()
    resume.click()
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    board = task.locator("[data-role=team-board]")
    for phase in ("plan", "fix", "review"):
        expect(board.locator(f"tr[data-phase-id={phase}]")).to_have_attribute(
            "data-state", "completed"
        )
    expect(task).to_contain_text("Phase plan done (from its checkpoint).")
    expect(task.locator(".verify-card.ok")).to_have_count(1)
    expect(task.locator("button[data-role=resume-task]")).to_have_count(0)
    events = page.evaluate(f"fetch('/api/tasks/{task_id}/events').then(r => r.json())")
    started = [e["data"]["phase_id"] for e in events["events"] if e["type"] == "phase_started"]
    assert started == ["fix", "review"]  # the checkpointed phase was not run again
