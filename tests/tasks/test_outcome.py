"""A task's outcome — `verified`, `unverified`, `no_changes` or the failure's error code — where a
user looks: the API (`outcome`), run_tasks' report rows, the admin, the chat's task_finished.
"fix the failing test" on a model that changes nothing must not look like a plain success; a
react task that changed a coding workspace verifies before it completes, by default."""

from __future__ import annotations

import textwrap

import pytest
from asgiref.sync import sync_to_async
from django.contrib.admin.sites import site
from django.test import Client

from apps.tasks.batch.outcomes import outcome_of
from apps.tasks.batch.report import _row
from apps.tasks.batch.spec import TaskSpec
from apps.tasks.models import Task
from apps.tasks.run.runner import run_task
from apps.tasks.services import api_token_create
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)

GOAL = "fix the failing test in tests/test_slug.py"
PROSE = """
- text: "The test fails because slugify does not collapse runs of separators. Use a + in the regex."
"""
FIX = """
- role: user
  text: "Fixing the regex."
  tool_calls:
    - name: str_replace_editor
      arguments:
        command: str_replace
        path: textkit/slug.py
        old_str: '    words = re.sub(r"[^a-zA-Z0-9]", separator, normalized.lower())'
        new_str: '    words = re.sub(r"[^a-zA-Z0-9]+", separator, normalized.lower())'
- after_tool: str_replace_editor
  text: "Fixed slugify."
"""


@pytest.fixture
def scripted(config_file, tmp_path):
    def use(script: str):
        path = tmp_path / "script.yaml"
        path.write_text(textwrap.dedent(script))
        config_file(f"models: {{main: {{provider: scripted, script: {path}}}}}\n")

    return use


def api_outcome(task: Task) -> dict:
    _, key = api_token_create(user=task.user)
    response = Client().get(f"/api/tasks/{task.pk}", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200
    return response.json()


async def test_a_fix_that_changed_nothing_is_no_changes_everywhere(demo, scripted):
    scripted(PROSE)
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL)
    assert await run_task(task.pk) == "completed"

    def check():
        stored = Task.objects.get(pk=task.pk)
        assert stored.outcome == "no_changes"
        assert api_outcome(stored)["outcome"] == "no_changes"
        finished = events_of(stored)[-1]
        assert finished.type == "task_finished" and finished.data["outcome"] == "no_changes"
        row = outcome_of(spec=TaskSpec(id="slug", goal=GOAL, mode="react", line=1), task_id=task.pk)
        assert row.outcome == "no_changes" and row.as_dict()["outcome"] == "no_changes"
        assert "finished without changing anything" in _row(row)
        admin = site._registry[Task]
        assert admin.outcome_display(stored) == "finished without changing anything"
        assert "outcome" in admin.list_filter  # the task list filters by it
        assert not [e for e in events_of(stored) if e.type == "verification_result"]

    await sync_to_async(check)()


async def test_a_react_task_that_changed_a_coding_workspace_is_verified(demo, scripted):
    scripted(FIX)  # verification.modes.react is off: react_when_changed verifies anyway
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL)
    assert await run_task(task.pk) == "completed"

    def check():
        stored = Task.objects.get(pk=task.pk)
        checks = [e.data for e in events_of(stored) if e.type == "verification_result"]
        assert checks and checks[-1]["passed"]
        assert stored.outcome == "verified" and api_outcome(stored)["outcome"] == "verified"

    await sync_to_async(check)()


async def test_changes_outside_a_coding_workspace_are_unverified(config_file, tmp_path, scripted):
    from tests.tasks.factories import make_user, make_workspace

    root = tmp_path / "notes"
    root.mkdir()
    (root / "notes.md").write_text("draft\n")
    scripted(
        """
        - role: user
          text: "Editing."
          tool_calls:
            - name: str_replace_editor
              arguments: {command: str_replace, path: notes.md, old_str: draft, new_str: final}
        - after_tool: str_replace_editor
          text: "Done."
        """
    )
    user = await sync_to_async(make_user)("bob")
    workspace = await sync_to_async(make_workspace)("notes", root, user)
    task = await sync_to_async(make_task)(user, workspace, goal="finalize the notes")
    assert await run_task(task.pk) == "completed"
    stored = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert stored.outcome == "unverified"
    assert not await sync_to_async(
        lambda: [e for e in events_of(stored) if e.type == "verification_result"]
    )()


async def test_a_failed_task_s_outcome_is_its_error_code(demo, scripted):
    scripted("- fail: auth\n  repeat: true\n")
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL)
    assert await run_task(task.pk) == "failed"
    stored = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert stored.outcome == stored.error["error_code"]
    assert stored.outcome not in {"verified", "unverified", "no_changes", ""}
    assert (await sync_to_async(api_outcome)(stored))["outcome"] == stored.outcome


async def test_a_plan_that_never_became_a_spec_still_counts_its_tokens(demo, scripted):
    scripted('- text: "I would plan it in three steps."\n  repeat: true\n')
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(user, workspace, goal=GOAL, mode="plan_exec")
    assert await run_task(task.pk) == "failed"
    stored = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert stored.outcome == "invalid_spec"
    assert stored.usage["input_tokens"] > 0 and stored.usage["llm_calls"] >= 1
