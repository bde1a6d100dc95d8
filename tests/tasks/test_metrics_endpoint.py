"""`/metrics` as an operator reads it (issue 41): a real web process (Daphne) and a real RQ worker
on a real Redis, both writing to one PROMETHEUS_MULTIPROC_DIR. A task sent through the API runs
on the worker; the web process's `/metrics` then shows what the worker did — the task finished,
its model calls (latency, tokens by alias), its tool calls, its wait in the queue, its run's
duration — and who may read it: a staff user's API token, not another user's, and not an
address missing from `metrics.allowed_addresses`."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.services import private_redis
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.slow

NOT_STAFF = (
    "from django.contrib.auth import get_user_model; from apps.tasks.services import "
    "api_token_create; u = get_user_model().objects.create_user('bob', password='pw-123-secret');"
    " print(api_token_create(user=u)[1])"
)


def samples(text: str) -> dict[tuple[str, tuple], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def total(found: dict, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and want <= set(ls))


def test_metrics_show_what_the_workers_did_to_staff_and_allowed_addresses_only(tmp_path):
    config = tmp_path / "agentkit.yaml"
    shipped = (ROOT / "agentkit.yaml").read_text()
    assert 'allowed_addresses: ["127.0.0.1", "::1"]' in shipped
    # No address allowed: this test's requests come from 127.0.0.1 and need a token.
    config.write_text(
        shipped.replace(
            'allowed_addresses: ["127.0.0.1", "::1"]', 'allowed_addresses: ["192.0.2.0/24"]'
        )
    )
    prometheus = tmp_path / "prometheus"
    prometheus.mkdir()
    with (
        private_redis(tmp_path) as redis_url,
        agentkit_server(
            tmp_path,
            worker=True,
            REDIS_URL=redis_url,
            AGENTKIT_EXECUTOR="rq",
            AGENTKIT_CONFIG=str(config),
            PROMETHEUS_MULTIPROC_DIR=str(prometheus),
        ) as server,
    ):
        staff = server.manage("create_api_token", "admin").stdout.strip().splitlines()[-1]
        other = server.manage("shell", "-c", NOT_STAFF).stdout.strip().splitlines()[-1]
        url = f"{server.url}/metrics"

        refused = httpx.get(url, timeout=30)
        assert refused.status_code == 403 and "metrics.allowed_addresses" in refused.text
        not_staff = httpx.get(url, headers={"Authorization": f"Bearer {other}"}, timeout=30)
        assert not_staff.status_code == 403
        auth = {"Authorization": f"Bearer {staff}"}
        before = samples(httpx.get(url, headers=auth, timeout=30).text)

        created = httpx.post(
            f"{server.url}/api/tasks",
            json={"workspace": "demo", "text": "fix the failing slug test", "mode": "react"},
            headers=auth,
            timeout=30,
        )
        assert created.status_code == 201, created.text
        task = f"{server.url}/api/tasks/{created.json()['id']}"
        deadline = time.monotonic() + 180
        while (status := httpx.get(task, headers=auth, timeout=30).json()["status"]) in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline, "the task did not finish"
            time.sleep(0.5)

        scraped = httpx.get(url, headers=auth, timeout=30)
        assert scraped.status_code == 200
        assert scraped.headers["content-type"].startswith("text/plain")
        after = samples(scraped.text)
        events = httpx.get(f"{task}/events?after=0", headers=auth, timeout=30).json()["events"]

    def grew(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert grew("agentkit_tasks_finished_total", mode="react", status=status) == 1
    assert grew("agentkit_runs_total", mode="react", outcome="finished") == 1
    assert grew("agentkit_run_duration_seconds_count", mode="react") == 1
    assert grew("agentkit_queue_wait_seconds_count", queue="agent") == 1
    assert grew("agentkit_task_wait_seconds_count", mode="react") == 1
    assert grew("agentkit_model_call_duration_seconds_count", alias="main", outcome="ok") >= 2
    assert grew("agentkit_model_time_to_first_token_seconds_count", alias="main") >= 1
    assert grew("agentkit_model_tokens_total", alias="main", kind="input") > 0
    assert grew("agentkit_model_tokens_total", alias="main", kind="output") > 0
    tools = [e["data"]["name"] for e in events if e["type"] == "tool_result"]
    assert tools, "the demo model's session calls tools"
    assert grew("agentkit_tool_calls_total") == len(tools)
    for tool in set(tools):
        assert grew("agentkit_tool_calls_total", tool=tool) == tools.count(tool)
    assert total(after, "agentkit_queue_depth", queue="agent") == 0
    assert ("agentkit_tasks_deferred", ()) in after
