"""The task start path's plain-statement lookups (apps/tasks/selectors.py, the prompt version
query): a re-sent message still returns the first task and uses its index, a non-member is
still refused, and the newest runnable prompt version still wins."""

from __future__ import annotations

import pytest
from django.db import connection

from apps.engine.config import EvolutionConfig
from apps.evolution.models import PromptRun, PromptVersion
from apps.evolution.services.prompts import prompt_for_task
from apps.tasks.conf import agent_config
from apps.tasks.models import Task
from apps.tasks.selectors import _sql, task_id_for_message
from apps.tasks.services import ApplicationError, task_create
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def config():
    return agent_config()


@pytest.fixture
def alice(tmp_path):
    user = make_user("alice")
    return user, make_workspace("alpha", tmp_path / "a", user)


def test_a_resent_message_returns_the_first_task_and_other_ids_create_new_ones(alice, config):
    user, workspace = alice
    first = task_create(
        user=user, workspace=workspace, text="hi", client_msg_id="m1", config=config
    )
    again = task_create(
        user=user, workspace=workspace, text="hi", client_msg_id="m1", config=config
    )
    other = task_create(
        user=user, workspace=workspace, text="hi", client_msg_id="m2", config=config
    )
    plain = task_create(user=user, workspace=workspace, text="hi", config=config)
    plain2 = task_create(user=user, workspace=workspace, text="hi", config=config)
    assert again.pk == first.pk and again.workspace == workspace
    assert len({first.pk, other.pk, plain.pk, plain2.pk}) == 4
    assert Task.objects.filter(client_msg_id="m1").count() == 1


def test_the_resend_check_is_per_user_and_uses_its_index(alice, tmp_path, config):
    user, workspace = alice
    bob = make_user("bob")
    theirs = make_workspace("beta", tmp_path / "b", bob)
    mine = task_create(user=user, workspace=workspace, text="hi", client_msg_id="m1", config=config)
    bobs = task_create(user=bob, workspace=theirs, text="hi", client_msg_id="m1", config=config)
    assert bobs.pk != mine.pk
    assert task_id_for_message(user_id=user.pk, client_msg_id="m1") == mine.pk
    assert task_id_for_message(user_id=bob.pk, client_msg_id="m9") is None
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {_sql('resent')}", (user.pk, "m1"))
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "tasks_task_user_client_msg" in plan, plan


def test_a_non_member_is_refused(alice, tmp_path, config):
    _, workspace = alice
    with pytest.raises(ApplicationError) as refused:
        task_create(user=make_user("eve"), workspace=workspace, text="hi", config=config)
    assert refused.value.extra["error_code"] == "not_found"


def test_the_newest_active_prompt_version_runs_and_none_gives_nothing(alice):
    user, workspace = alice
    task = make_task(user, workspace)
    assert prompt_for_task(task=task, config=EvolutionConfig()) == ""
    assert not PromptRun.objects.exists()
    for text, status in (("OLD", "active"), ("NEW", "active"), ("NOPE", "proposed")):
        PromptVersion.objects.create(
            workspace=workspace, target_kind="mode", target_name="react", text=text, status=status
        )
    assert prompt_for_task(task=task, config=EvolutionConfig(ab_share=0.0)) == "NEW"
    assert PromptRun.objects.get(task=task).version.text == "NEW"


def test_the_end_of_run_row_checks_find_only_the_tasks_own_rows_in_the_asked_statuses(alice):
    """selectors.task_has_rows: the end of every run asks whether the task has an open spec, a
    prompt run (plain statements, apps/specs/services.py and apps/evolution/services)."""
    from apps.specs.models import Spec, SpecStatus
    from apps.specs.services import spec_finish_for_task
    from apps.tasks.selectors import task_has_rows

    user, workspace = alice
    task, other = (make_task(user, workspace, goal=g) for g in ("a", "b"))
    Spec.objects.create(task=task, workspace=workspace, goal="a", draft={"goal": "a"})
    open_ = (SpecStatus.EXECUTING, SpecStatus.PENDING_REVIEW, SpecStatus.DRAFT)
    assert task_has_rows(Spec, task_id=task.pk, statuses=open_)
    assert not task_has_rows(Spec, task_id=task.pk, statuses=(SpecStatus.DONE,))
    assert not task_has_rows(Spec, task_id=other.pk)
    assert not task_has_rows(PromptRun, task_id=task.pk)

    spec_finish_for_task(task_id=task.pk, completed=True)  # a draft never executed: failed
    assert Spec.objects.get(task=task).status == SpecStatus.FAILED
    assert not task_has_rows(Spec, task_id=task.pk, statuses=open_)
