"""The changes a task made, from its events, and reverting them (service + API + access)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.utils import timezone

from apps.tasks.models import TaskEvent
from apps.tasks.run.runner import run_task
from apps.tasks.services import ApplicationError
from apps.tasks.workspaces.changes import _apply, changes_payload, task_revert
from tests.tasks.factories import make_task, make_user

pytestmark = pytest.mark.django_db(transaction=True)

FIXED = 'r"[^a-zA-Z0-9]+"'
BROKEN = 'r"[^a-zA-Z0-9]"'


async def _fixed_demo(demo):
    user, workspace, root = demo
    task = await sync_to_async(make_task)(
        user, workspace, goal="fix the failing test in tests/test_slug.py"
    )
    assert await run_task(task.pk) == "completed"
    await sync_to_async(task.refresh_from_db)()
    return user, task, root / "textkit" / "slug.py"


async def test_the_demo_fix_is_listed_with_its_diff_and_reverting_restores_the_file(demo):
    user, task, slug = await _fixed_demo(demo)
    files = await sync_to_async(changes_payload)(task=task)
    assert [f["path"] for f in files] == ["textkit/slug.py"]
    change = files[0]
    assert change["state"] == "applied" and change["revertible"] and not change["created"]
    assert "-    words = re.sub(" + BROKEN in change["diff"]
    assert "+    words = re.sub(" + FIXED in change["diff"]
    assert FIXED in slug.read_text()

    assert await sync_to_async(task_revert)(user=user, task=task) == ["textkit/slug.py"]
    assert BROKEN in slug.read_text() and FIXED not in slug.read_text()
    files = await sync_to_async(changes_payload)(task=task)
    assert files[0]["state"] == "reverted" and not files[0]["revertible"]


async def test_a_file_changed_since_the_task_is_refused_and_left_alone(demo):
    user, task, slug = await _fixed_demo(demo)
    edited = slug.read_text().replace("def slugify", "def slugify_renamed")
    slug.write_text(edited.replace(FIXED, 'r"[^a-z]+"'))
    files = await sync_to_async(changes_payload)(task=task)
    assert files[0]["state"] == "changed_since" and not files[0]["revertible"]
    with pytest.raises(ApplicationError, match="changed after this task"):
        await sync_to_async(task_revert)(user=user, task=task, path="textkit/slug.py")
    assert slug.read_text() == edited.replace(FIXED, 'r"[^a-z]+"')


async def test_another_user_cannot_see_or_revert_the_changes(demo):
    _, task, slug = await _fixed_demo(demo)
    mallory = await sync_to_async(make_user)("mallory")
    with pytest.raises(ApplicationError, match="not found"):
        await sync_to_async(task_revert)(user=mallory, task=task)
    client = Client()
    await sync_to_async(client.force_login)(mallory)
    response = await sync_to_async(client.get)(f"/api/tasks/{task.pk}/changes")
    assert response.status_code == 404
    response = await sync_to_async(client.post)(
        f"/api/tasks/{task.pk}/revert", data="{}", content_type="application/json"
    )
    assert response.status_code == 404
    assert FIXED in slug.read_text()


async def test_revert_through_the_api_for_one_file(demo):
    user, task, slug = await _fixed_demo(demo)
    client = Client()
    await sync_to_async(client.force_login)(user)
    listed = (await sync_to_async(client.get)(f"/api/tasks/{task.pk}/changes")).json()
    assert listed["files"][0]["path"] == "textkit/slug.py"
    response = await sync_to_async(client.post)(
        f"/api/tasks/{task.pk}/revert",
        data='{"path": "textkit/slug.py"}',
        content_type="application/json",
    )
    assert response.json() == {"id": task.pk, "reverted": ["textkit/slug.py"]}
    assert BROKEN in slug.read_text()
    again = await sync_to_async(client.post)(
        f"/api/tasks/{task.pk}/revert",
        data='{"path": "textkit/slug.py"}',
        content_type="application/json",
    )
    assert again.status_code == 400 and again.json()["error"]["code"] == "cannot_revert"


def _event(task, seq, kind, data):
    TaskEvent.objects.create(task=task, seq=seq, type=kind, data=data, ts=timezone.now())


def test_a_created_file_is_removed_and_an_undone_edit_is_not_listed(demo):
    user, workspace, root = demo
    task = make_task(user, workspace, status="completed")
    (root / "notes.md").write_text("hello\nworld\n")
    _event(
        task,
        1,
        "tool_call",
        {
            "name": "str_replace_editor",
            "call_id": "c1",
            "arguments": {"command": "create", "path": "notes.md"},
        },
    )
    _event(
        task,
        2,
        "tool_result",
        {
            "name": "str_replace_editor",
            "call_id": "c1",
            "ok": True,
            "output": "Created notes.md (2 lines).",
            "data": {
                "path": "notes.md",
                "diff": "--- a/notes.md\n+++ b/notes.md\n@@ -0,0 +1,2 @@\n+hello\n+world\n",
            },
        },
    )
    _event(
        task,
        3,
        "tool_call",
        {
            "name": "str_replace_editor",
            "call_id": "c2",
            "arguments": {"command": "str_replace", "path": "README.md"},
        },
    )
    _event(
        task,
        4,
        "tool_result",
        {
            "name": "str_replace_editor",
            "call_id": "c2",
            "ok": True,
            "output": "Replaced",
            "data": {"path": "README.md", "diff": "@@ -1 +1 @@\n-a\n+b\n"},
        },
    )
    _event(
        task,
        5,
        "tool_call",
        {
            "name": "str_replace_editor",
            "call_id": "c3",
            "arguments": {"command": "undo_edit", "path": "README.md"},
        },
    )
    _event(
        task,
        6,
        "tool_result",
        {
            "name": "str_replace_editor",
            "call_id": "c3",
            "ok": True,
            "output": "Restored",
            "data": {"path": "README.md", "undone": "str_replace"},
        },
    )
    files = changes_payload(task=task)
    assert [(f["path"], f["created"], f["state"]) for f in files] == [("notes.md", True, "applied")]
    assert task_revert(user=user, task=task) == ["notes.md"]
    assert not (root / "notes.md").exists()
    assert changes_payload(task=task)[0]["state"] == "reverted"


def test_a_running_task_cannot_be_reverted(demo):
    user, workspace, _ = demo
    task = make_task(user, workspace, status="running")
    with pytest.raises(ApplicationError, match="still running"):
        task_revert(user=user, task=task)


def test_patches_apply_and_unapply_exactly():
    diff = "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n@@ -6,2 +6,3 @@\n f\n g\n+h\n"
    before = "a\nb\nc\nd\ne\nf\ng\n"
    after = _apply(before, diff, reverse=False)
    assert after == "a\nB\nc\nd\ne\nf\ng\nh\n"
    assert _apply(after, diff, reverse=True) == before


async def test_a_later_tasks_identical_edit_is_its_own_and_revert_names_that_task(demo):
    user, task, slug = await _fixed_demo(demo)
    assert await sync_to_async(task_revert)(user=user, task=task) == ["textkit/slug.py"]
    # A later task makes the very same fix: the earlier task's panel must not claim it.
    _, workspace, _ = demo
    later = await sync_to_async(make_task)(
        user, workspace, goal="fix the failing test in tests/test_slug.py"
    )
    assert await run_task(later.pk) == "completed"
    assert FIXED in slug.read_text()
    files = await sync_to_async(changes_payload)(task=task)
    assert files[0]["state"] == "changed_later" and not files[0]["revertible"]
    assert files[0]["later_task"] == later.pk
    assert f"task #{later.pk}" in files[0]["note"]
    with pytest.raises(ApplicationError, match=f"task #{later.pk} changed this file"):
        await sync_to_async(task_revert)(user=user, task=task, path="textkit/slug.py")
    assert FIXED in slug.read_text()  # left alone
    # The later task's own panel: applied and revertible; once reverted, both read reverted.
    await sync_to_async(later.refresh_from_db)()
    mine = await sync_to_async(changes_payload)(task=later)
    assert mine[0]["state"] == "applied" and mine[0]["revertible"]
    assert await sync_to_async(task_revert)(user=user, task=later) == ["textkit/slug.py"]
    files = await sync_to_async(changes_payload)(task=task)
    assert files[0]["state"] == "reverted"
