"""The user a batch runs as, tasks created together, --model on every task, and the live
progress bar."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model

from apps.tasks.batch.outcomes import Outcome
from apps.tasks.batch.progress import ConsoleProgress
from apps.tasks.batch.services import batch_tasks_create, batch_user, batch_workspace_copy
from apps.tasks.batch.spec import TaskSpec
from apps.tasks.conf import agent_config
from apps.tasks.models import Task, Workspace
from apps.tasks.services import ApplicationError


@pytest.mark.django_db
def test_the_batch_runs_as_the_bootstrap_admin_the_only_superuser_or_the_named_user(monkeypatch):
    User = get_user_model()
    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "admin")
    with pytest.raises(ApplicationError, match=r"run 'python manage\.py bootstrap'"):
        batch_user(username=None)
    root = User.objects.create_superuser("root", password="x")
    assert batch_user(username=None) == root  # the only superuser
    User.objects.create_superuser("other", password="x")
    with pytest.raises(ApplicationError, match="choose one with --user"):
        batch_user(username=None)
    admin = User.objects.create_superuser("admin", password="x")
    assert batch_user(username=None) == admin
    bob = User.objects.create_user("bob", password="x")
    assert batch_user(username="bob") == bob
    with pytest.raises(ApplicationError, match="no active user 'carol'"):
        batch_user(username="carol")


@pytest.mark.django_db(transaction=True)
def test_tasks_created_together_share_a_transaction_but_a_failure_undoes_only_its_own(
    tmp_path, settings
):
    settings.AGENTKIT_MAX_MESSAGE_CHARS = 100
    user = get_user_model().objects.create_superuser("admin", password="x")
    source = tmp_path / "source"
    source.mkdir()
    (source / "notes.txt").write_text("hello\n")
    specs = [
        TaskSpec(id="ok", goal="read notes.txt", mode="react", line=1, source=source,
                 verification=("true",)),
        TaskSpec(id="long", goal="x" * 101, mode="react", line=2, source=source),
        TaskSpec(id="also-ok", goal="summarize notes.txt", mode="react", line=3, source=source),
    ]  # fmt: skip
    items = [
        (spec, batch_workspace_copy(spec=spec, label="b1", workspaces_dir=tmp_path / "ws"))
        for spec in specs
    ]
    created = batch_tasks_create(items, user=user, label="b1", config=agent_config())

    ok, failed, also_ok = created
    assert isinstance(failed, ApplicationError) and "too long" in failed.message
    assert [t.goal for t in (ok, also_ok)] == ["read notes.txt", "summarize notes.txt"]
    assert set(Task.objects.values_list("goal", flat=True)) == {
        "read notes.txt",
        "summarize notes.txt",
    }
    assert sorted(Workspace.objects.values_list("name", flat=True)) == ["b1-also-ok", "b1-ok"]
    assert Workspace.objects.get(name="b1-ok").verification_commands == ["true"]
    assert ok.workspace.members.filter(pk=user.pk).exists()
    # the failed task's copy is gone, the others are the tasks' workspaces
    assert sorted(p.name for p in (tmp_path / "ws" / "b1").iterdir()) == ["also-ok", "ok"]


def test_on_a_terminal_progress_is_a_bar_redrawn_in_place_with_a_line_per_finished_task():
    out = io.StringIO()
    progress = ConsoleProgress(out, 2, live=True)
    progress.task_started(TaskSpec(id="a", goal="g", mode="react", line=1), 7)
    progress.tick()
    progress.task_finished(Outcome(id="a", status="completed", steps=3, duration_s=1.0))
    progress.close()
    text = out.getvalue()
    assert "\r\033[2K[" in text and "running 1: a" in text and "0/2" in text
    assert "[1/2] a: completed · 3 steps" in text
    assert text.endswith("\r\033[2K")  # the bar is cleared before the table

    plain = io.StringIO()
    progress = ConsoleProgress(plain, 2, live=False)
    progress.task_started(TaskSpec(id="a", goal="g", mode="react", line=1), 7)
    progress.tick()
    assert plain.getvalue() == "[0/2] a: started as task #7 (react)\n"  # no control characters


@pytest.mark.django_db
def test_a_task_the_batch_stops_waiting_for_ends_with_its_events(tmp_path):
    """run_tasks gives up on a task (its RQ job failed, or a second Ctrl-C): the task ends
    cancelled the way every task ends, with an `error` and one `task_finished` after its stored
    events, so its sockets and the API see it end; a task already over is left as it is."""
    from apps.tasks.batch.running import abandon
    from tests.tasks.factories import add_events, make_task, make_user, make_workspace

    user = make_user("batch")
    space = make_workspace("batch-space", tmp_path, user)
    running = make_task(user, space, goal="long", status="running")
    add_events(running, "task_started", "token")
    over = make_task(user, space, goal="done", status="completed")
    add_events(over, "task_started", "task_finished")

    assert abandon([running.pk, over.pk], reason="its RQ job failed") == 1
    kinds = list(running.events.order_by("seq").values_list("seq", "type"))
    assert kinds == [(1, "task_started"), (2, "token"), (3, "error"), (4, "task_finished")]
    running.refresh_from_db()
    assert (running.status, running.error["error_code"]) == ("cancelled", "cancelled")
    assert "its RQ job failed" in running.error["message"]
    assert list(over.events.values_list("type", flat=True)) == ["task_started", "task_finished"]
    assert Task.objects.get(pk=over.pk).status == "completed"
