"""Verification at the final answer through the real runner: sandboxed pytest + ruff on a copy of
the demo workspace, failures re-injected, the scripted model fixes the bug, verification passes."""

from __future__ import annotations

import textwrap

import pytest
from asgiref.sync import sync_to_async

from apps.tasks.models import Task, TaskEvent
from apps.tasks.run.runner import run_task
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = """
- match: '(?i)^make the tests pass'
  role: user
  text: "Done: the tests pass now."
- match: 'test_runs_of_separators_collapse'
  role: user
  text: "Verification found a failing test; let me read slugify."
  tool_calls: [{name: read_file, arguments: {path: textkit/slug.py, symbol: slugify}}]
- after_tool: read_file
  text: "Collapsing runs of separators."
  tool_calls:
    - name: str_replace_editor
      arguments:
        command: str_replace
        path: textkit/slug.py
        old_str: '    words = re.sub(r"[^a-zA-Z0-9]", separator, normalized.lower())'
        new_str: '    words = re.sub(r"[^a-zA-Z0-9]+", separator, normalized.lower())'
- after_tool: str_replace_editor
  text: "Fixed slugify: runs of separators now collapse."
"""


@pytest.fixture
def configure(config_file, tmp_path):
    def use(*, react_verification: bool):
        script = tmp_path / "script.yaml"
        script.write_text(textwrap.dedent(SCRIPT))
        config_file(
            f"models: {{main: {{provider: scripted, script: {script}}}}}\n"
            f"verification: {{modes: {{react: {str(react_verification).lower()}}}}}\n"
        )

    return use


async def test_failed_verification_is_reinjected_and_the_fix_passes(demo, configure):
    configure(react_verification=True)
    user, workspace, root = demo
    task = await sync_to_async(make_task)(user, workspace, goal="make the tests pass")
    assert await run_task(task.pk) == "completed"

    events = await sync_to_async(events_of)(task)
    checks = [e.data for e in events if e.type == "verification_result"]
    assert [(c["passed"], c["reinjected"]) for c in checks] == [(False, True), (True, False)]
    first = checks[0]
    assert any("test_runs_of_separators_collapse" in error for error in first["errors"])
    assert any(cmd.startswith("pytest") for cmd in first["commands"])
    assert any(cmd.startswith("ruff") for cmd in first["commands"])
    assert "hello----world" in first["log"] or "AssertionError" in first["log"]
    names = [e.data["name"] for e in events if e.type == "tool_call"]
    assert names == ["read_file", "str_replace_editor"]  # the fix came after the re-injection
    assert 'r"[^a-zA-Z0-9]+"' in (root / "textkit" / "slug.py").read_text()
    finished = events[-1].data
    assert finished["status"] == "completed" and len(finished["verification"]) == 2


async def test_react_never_verifies_unless_configured(demo, configure):
    configure(react_verification=False)
    user, workspace, root = demo
    task = await sync_to_async(make_task)(user, workspace, goal="make the tests pass")
    assert await run_task(task.pk) == "completed"
    events = await sync_to_async(events_of)(task)
    assert not [e for e in events if e.type == "verification_result"]
    assert 'r"[^a-zA-Z0-9]"' in (root / "textkit" / "slug.py").read_text()  # nothing was fixed


async def test_direct_chat_is_never_verified_even_when_react_is(demo, configure):
    configure(react_verification=True)
    user, workspace, _ = demo
    task = await sync_to_async(make_task)(
        user, workspace, goal="make the tests pass", mode="direct_chat"
    )
    assert await run_task(task.pk) == "completed"
    assert not await sync_to_async(
        TaskEvent.objects.filter(task=task, type="verification_result").exists
    )()
    assert (await sync_to_async(Task.objects.get)(pk=task.pk)).status == "completed"


async def test_workspace_and_skill_verification_commands_run_at_the_final_answer(
    config_file, tmp_path
):
    # A workspace that is not a Python project: only its own and the skill's verification
    # commands decide. Each command leaves a marker file, so the test sees that it really ran.
    root = tmp_path / "notes"
    root.mkdir()
    (root / "notes.md").write_text("# Notes\n")
    script = tmp_path / "script.yaml"
    script.write_text("- text: 'The notes are fine as they are.'\n")
    config_file(
        f"""
        models: {{main: {{provider: scripted, script: {script}}}}}
        verification: {{modes: {{react: true}}}}
        skills:
          checker:
            description: Checks notes.
            tools: [read_file]
            verification_commands: ["touch skill-check-ran"]
        """
    )
    user = await sync_to_async(make_user)("carol")
    workspace = await sync_to_async(make_workspace)("notes", root, user)
    workspace.verification_commands = ["touch workspace-check-ran"]
    await sync_to_async(workspace.save)()
    task = await sync_to_async(make_task)(user, workspace, goal="check the notes", skill="checker")

    assert await run_task(task.pk) == "completed"
    events = await sync_to_async(events_of)(task)
    (check,) = [e.data for e in events if e.type == "verification_result"]
    assert check["passed"] and check["commands"] == [
        "touch workspace-check-ran",
        "touch skill-check-ran",
    ]
    assert (root / "workspace-check-ran").is_file() and (root / "skill-check-ran").is_file()
