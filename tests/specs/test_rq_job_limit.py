"""With the RQ executor, a task's job may first wait for its spec review: its time limit is the
queue's plus spec_review.timeout_seconds, so a slow reviewer does not get the work killed."""

from __future__ import annotations

import django_rq
import django_rq.settings
import pytest
from django.db import transaction

from apps.tasks.run.executors import task_submit
from tests.specs.conftest import new_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(("enabled", "limit"), [(True, 3600 + 900), (False, 3600)])
def test_the_job_limit_adds_the_review_wait(
    workspace, config_file, settings, redis_url, monkeypatch, enabled, limit
):
    settings.REDIS_URL = redis_url
    monkeypatch.setitem(
        django_rq.settings.QUEUES, "agent", {"URL": redis_url, "DEFAULT_TIMEOUT": 3600}
    )
    settings.RQ_QUEUES = {
        **settings.RQ_QUEUES,
        "agent": {"URL": redis_url, "DEFAULT_TIMEOUT": 3600},
    }
    config_file(
        f"executor: {{kind: rq}}\nspec_review: {{enabled: {str(enabled).lower()}, timeout_seconds: 900}}\n"
    )
    queue = django_rq.get_queue("agent")
    queue.empty()
    user, ws, _ = workspace
    task = new_task(user, ws)
    with transaction.atomic():
        task_submit(task_id=task.pk)
    job = queue.fetch_job(f"task-{task.pk}-1")
    queue.empty()
    assert job is not None and job.timeout == limit
