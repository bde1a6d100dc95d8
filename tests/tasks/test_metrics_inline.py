"""`/metrics` of a single web process (`make run`: the inline executor, no
PROMETHEUS_MULTIPROC_DIR): a task run in the process shows in its metrics, read from the local
host without a token (the default `metrics.allowed_addresses`); another address needs one."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from apps.tasks.run.runner import run_task
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)


def value(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return sample.value
    return 0.0


def test_a_task_run_in_the_web_process_shows_in_its_metrics(demo, monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    user, workspace, _ = demo
    local = Client(REMOTE_ADDR="127.0.0.1")
    before = local.get("/metrics")
    assert before.status_code == 200
    finished = ("agentkit_tasks_finished_total", {"mode": "react", "status": "completed"})
    was = value(before.content.decode(), finished[0], **finished[1])

    task = make_task(user, workspace, goal="fix the failing slug test")
    assert async_to_sync(run_task)(task.pk) == "completed"

    after = local.get("/metrics").content.decode()
    assert value(after, finished[0], **finished[1]) == was + 1
    assert value(after, "agentkit_tasks", mode="react", status="queued") == 0
    assert Client(REMOTE_ADDR="203.0.113.9").get("/metrics").status_code == 403
