"""`GET /healthz` (apps/tasks/doors/health.py) and the deployment's executor override
(AGENTKIT_EXECUTOR, apps/tasks/conf.py): a real Redis, the test database."""

from __future__ import annotations

import subprocess
import sys

import pytest
import redis
from django.test import Client

from apps.engine.config import ConfigError
from apps.tasks.conf import reload_agent_config
from apps.tasks.worker import seen_key, worker_seen
from tests.support import ROOT, free_port, server_env

pytestmark = pytest.mark.django_db


@pytest.fixture
def deployment(settings):
    """Set REDIS_URL and AGENTKIT_EXECUTOR for one test."""

    def use(redis_url: str = "", executor: str = ""):
        settings.REDIS_URL = redis_url
        settings.AGENTKIT_EXECUTOR = executor
        reload_agent_config()

    yield use
    settings.AGENTKIT_EXECUTOR = ""
    reload_agent_config()


def test_healthz_is_ok_for_one_process_with_the_inline_executor(deployment):
    deployment()
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {
        "ok": True,
        "database": {"ok": True},
        "redis": {"ok": True, "configured": False},
        "workers": {"ok": True, "required": False},
    }


def test_healthz_with_executor_rq_needs_a_worker_seen_recently(deployment, redis_url):
    deployment(redis_url, "rq")
    connection = redis.Redis.from_url(redis_url)
    connection.delete(seen_key("agent"), seen_key("evolution"))
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["workers"] == {"ok": False, "required": True, "seen": 0}
    worker_seen(connection, "gone-worker", ["agent"], now=0)  # seen long ago: not counted
    worker_seen(connection, "evolution-1", ["evolution"])  # runs no task: not counted
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["workers"] == {"ok": False, "required": True, "seen": 0}
    worker_seen(connection, "worker-1", ["agent"])
    response = Client().get("/healthz")
    assert response.status_code == 200, response.json()
    assert response.json()["workers"] == {"ok": True, "required": True, "seen": 1}
    connection.delete(seen_key("agent"), seen_key("evolution"))


def test_healthz_says_when_redis_is_unreachable(deployment):
    deployment(f"redis://127.0.0.1:{free_port()}/0", "rq")
    response = Client().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["redis"]["ok"] is False and body["workers"]["ok"] is False
    assert body["database"] == {"ok": True}


def test_agentkit_executor_overrides_the_configured_kind(deployment):
    deployment(executor="rq")
    assert reload_agent_config().executor.kind == "rq"
    deployment(executor="inline")
    assert reload_agent_config().executor.kind == "inline"


def test_an_invalid_agentkit_executor_is_refused_with_what_to_do(deployment):
    with pytest.raises(ConfigError, match=r"AGENTKIT_EXECUTOR(.|\n)*'celery' is not an executor"):
        deployment(executor="celery")


def test_manage_check_reports_an_invalid_agentkit_executor(tmp_path):
    checked = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=server_env(tmp_path, AGENTKIT_EXECUTOR="celery"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode != 0
    assert "'celery' is not an executor: use one of inline, rq" in checked.stderr
