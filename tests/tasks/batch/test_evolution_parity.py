"""Evolution parity: a batch task that fails is scheduled for evolution and learned from exactly
like the same task sent from the chat (the runner's lifecycle hook does both). The batch task is
also a chat task to see: in its owner's sidebar (conversations) and in admin."""

from __future__ import annotations

import asyncio
import json
import textwrap

import pytest
from django.core.management import call_command
from django.test import Client

from apps.evolution.models import Lesson
from apps.tasks.models import Task
from tests.evolution.conftest import GOAL, drain, gives_up_config, restore_demo
from tests.evolution.test_parity import _over_websocket
from tests.support import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failed_batch_task_is_scheduled_and_learned_from_like_a_chat_task(
    demo, config_file, evolution_queue, settings, tmp_path, admin_client
):
    user, _workspace, root = demo
    config_file(gives_up_config())
    settings.AGENTKIT_WORKSPACES_DIR = tmp_path / "workspaces"

    chat_task = asyncio.run(_over_websocket(user))
    restore_demo(root)
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        textwrap.dedent(
            f"""
            - id: gives-up
              mode: plan_exec
              source: {ROOT / "demo" / "workspace"}
              goal: {GOAL}
              expect: {{status: gave_up_after_reflections}}
            """
        )
    )
    report = tmp_path / "report.json"
    call_command("run_tasks", str(suite), "--user", user.username, "--report", str(report))
    [outcome] = json.loads(report.read_text())["tasks"]
    batch_task = outcome["task_id"]

    assert sorted(evolution_queue.job_ids) == sorted(
        [f"evolve-task-{chat_task}", f"evolve-task-{batch_task}"]
    )
    assert drain(evolution_queue) == 2
    learned = {
        task_id: sorted(
            Lesson.objects.filter(task_id=task_id).values_list("category", "pitfall__trigger")
        )
        for task_id in (chat_task, batch_task)
    }
    assert learned[chat_task] and learned[chat_task] == learned[batch_task]
    for task_id in (chat_task, batch_task):
        assert Task.objects.get(pk=task_id).status == "gave_up_after_reflections"

    owner = Client()
    owner.force_login(user)
    listed = owner.get("/api/conversations").json()["conversations"]
    assert batch_task in [task["id"] for c in listed for task in c["tasks"]]
    page = admin_client.get(f"/admin/tasks/task/{batch_task}/change/")
    assert page.status_code == 200 and GOAL in page.content.decode()
