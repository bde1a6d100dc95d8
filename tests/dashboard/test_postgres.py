"""The dashboard's series on PostgreSQL: the JSON lookups, the usage sums and the day buckets
are vendor-specific SQL, so the same figures are computed on a real throwaway cluster."""

from __future__ import annotations

import json

import pytest

from tests.support import manage, server_env

pytestmark = pytest.mark.slow

SCRIPT = """
import json
from datetime import date, datetime, timezone
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone as tz
from apps.dashboard.selectors import dashboard_data, dashboard_tasks
from apps.evolution.models import Pitfall, PitfallInjection
from apps.tasks.models import Task, TaskEvent, Workspace

user = get_user_model().objects.create_user("alice", password="pw-123-secret")
ws = Workspace.objects.create(name="alpha", root_dir="/tmp/alpha")
ws.members.add(user)

def task(status, day, usage, *events):
    t = Task.objects.create(user=user, workspace=ws, mode="plan_exec", goal="g", status=status,
                            usage=usage)
    Task.objects.filter(pk=t.pk).update(created_at=datetime(2026, 11, day, 23, 59, tzinfo=timezone.utc))
    for seq, (kind, data) in enumerate(events, 1):
        TaskEvent.objects.create(task=t, seq=seq, type=kind, data=data, ts=tz.now())
    return t

def v(attempt, passed):
    return ("verification_result", {"attempt": attempt, "passed": passed})

first = task("completed", 23, {"input_tokens": 1000, "cache_read_tokens": 750}, v(1, True))
task("completed", 22, {"input_tokens": 100}, v(1, False), v(2, False), ("reflection", {}), v(3, True))
task("gave_up_after_reflections", 23, {}, v(1, False), v(2, False))
pitfall = Pitfall.objects.create(workspace=ws, category="loop", trigger="t", advice="a", severity="high")
PitfallInjection.objects.create(pitfall=pitfall, task=first, outcome="completed")
data = dashboard_data(tasks=dashboard_tasks(user=user), days=2, today=date(2026, 11, 23))
print(json.dumps({"vendor": connection.vendor, "outcomes": data.outcomes,
                  "cache": data.cache_hit_rate, "verification": data.verification,
                  "pitfalls": data.pitfalls, "recent": [t.cache_read_tokens for t in data.recent]}))
"""


def test_dashboard_series_are_the_same_on_postgres(migrated_postgres_url, tmp_path):
    env = server_env(tmp_path, DATABASE_URL=migrated_postgres_url)
    result = manage(env, "shell", "-c", SCRIPT)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["vendor"] == "postgresql"
    assert figures["outcomes"]["completed"] == [1, 1]
    assert figures["outcomes"]["gave_up_after_reflections"] == [0, 1]
    assert figures["cache"] == [0.0, 0.75]
    assert figures["verification"] == {
        "first_try": [0, 1],
        "after_reinjection": [0, 0],
        "after_reflection": [1, 0],
        "failed": [0, 1],
    }
    assert figures["pitfalls"] == {"completed": [0, 1], "failed": [0, 0], "other": [0, 0]}
    assert figures["recent"] == [0, 750, 0]  # oldest first: day 22, then day 23 by id


EVALUATIONS_SCRIPT = """
import json, re
from datetime import datetime, timezone
from django.contrib.auth import get_user_model
from django.db import connection
from django.template.loader import render_to_string
from apps.dashboard.evaluations import evaluation_runs
from apps.tasks.models import EvaluationRun

user = get_user_model().objects.create_user("erin", password="pw-123-secret")  # alice: the other test, same cluster
now = datetime(2026, 11, 23, 9, 0, tzinfo=timezone.utc)
EvaluationRun.objects.create(
    user=user, suite="humaneval", modes=["plan_exec", "react"], started_at=now, finished_at=now,
    summary={"plan_exec": {"solved": 2, "runs": 2, "solved_pct": 100.0},
             "react": {"solved": 1, "runs": 2, "solved_pct": 50.0}},
)
html = render_to_string("dashboard/evaluations.html", {"runs": evaluation_runs(user=user)})
cell = re.search(r"<td>(plan_exec|react) .*?</td>", html).group(0)
print(json.dumps({"vendor": connection.vendor, "cell": cell}))
"""


def test_the_evaluations_list_keeps_the_runs_mode_order_on_postgres(
    migrated_postgres_url, tmp_path
):
    """jsonb keeps no key order (shorter keys first): the list follows the run's `modes`."""
    env = server_env(tmp_path, DATABASE_URL=migrated_postgres_url)
    result = manage(env, "shell", "-c", EVALUATIONS_SCRIPT)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["vendor"] == "postgresql"
    assert out["cell"] == "<td>plan_exec 2/2 (100.0 %) · react 1/2 (50.0 %)</td>"
