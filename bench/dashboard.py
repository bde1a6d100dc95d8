"""Dashboard: the time to compute every series of the dashboard page (and to serve the whole
page) for a user with 10,000 tasks over the last 30 days (target: page p90 ≤ 500 ms
on the shared 2-core machine; the load average is recorded with the figures).

In process, on a fresh migrated SQLite file. The tasks are spread over 30 days with a mix of
statuses and usage; each has 20 events (task_started, tokens, task_finished), and a
third of them are plan_exec runs with 1-3 verification_result events and a reflection when
they needed one; one in five had a pitfall injected. `dashboard_data` computes the six series;
the page adds the SVG rendering and the template (Django test client, logged in).
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

TASKS = 10_000
EVENTS_PER_TASK = 20
DAYS = 30
RUNS = 10


def _setup(tmp: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentkit_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)


def _populate(rng: random.Random, tmp: Path):
    from apps.evolution.models import Pitfall, PitfallInjection
    from apps.tasks.models import Task, TaskEvent
    from tests.tasks.factories import make_user, make_workspace

    user = make_user("bench")
    workspace = make_workspace("bench", tmp, user)
    other = make_workspace("other", tmp, make_user("other"))  # never counted
    now = datetime.now(UTC)
    statuses = ["completed"] * 6 + ["failed", "gave_up_after_reflections", "cancelled", "running"]
    tasks = []
    for i in range(TASKS + TASKS // 10):
        prompt = rng.randint(1_000, 60_000)
        tasks.append(
            Task(
                user=user,
                workspace=workspace if i < TASKS else other,
                mode="plan_exec" if i % 3 == 0 else "react",
                goal=f"task {i}: fix the thing",
                status=rng.choice(statuses),
                usage={
                    "input_tokens": prompt,
                    "cache_read_tokens": rng.randint(0, prompt),
                    "output_tokens": rng.randint(50, 3_000),
                    "llm_calls": rng.randint(1, 20),
                },
                cost=rng.random() / 10,
            )
        )
    Task.objects.bulk_create(tasks, batch_size=2_000)
    for task in tasks:  # bulk_create skips auto_now_add's spread; set the days directly
        task.created_at = now - timedelta(days=rng.uniform(0, DAYS - 1))
    Task.objects.bulk_update(tasks, ["created_at"], batch_size=2_000)
    events = []
    for task in tasks:
        items = [("task_started", {})] + [
            ("token", {"step": i}) for i in range(EVENTS_PER_TASK - 2)
        ]
        if task.mode == "plan_exec":
            attempts = rng.randint(1, 3)
            for attempt in range(1, attempts + 1):
                if attempt == 3:
                    items.append(("reflection", {"ok": True}))
                passed = attempt == attempts and task.status == "completed"
                items.append(("verification_result", {"attempt": attempt, "passed": passed}))
        items.append(("task_finished", {"status": task.status}))
        for seq, (kind, data) in enumerate(items, 1):
            events.append(TaskEvent(task=task, seq=seq, type=kind, data=data, ts=now))
        if len(events) > 20_000:
            TaskEvent.objects.bulk_create(events, batch_size=5_000)
            events = []
    TaskEvent.objects.bulk_create(events, batch_size=5_000)
    pitfall = Pitfall.objects.create(
        workspace=workspace, category="loop", trigger="t", advice="a", severity="high"
    )
    PitfallInjection.objects.bulk_create(
        [
            PitfallInjection(pitfall=pitfall, task=task, outcome=task.status)
            for task in tasks[:TASKS:5]
        ],
        batch_size=2_000,
    )
    return user


def main() -> dict:
    from bench._harness import report, summarize

    rng = random.Random(17)
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp_name:
        tmp = Path(tmp_name)
        _setup(tmp)
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        from apps.dashboard.selectors import dashboard_data, dashboard_tasks

        started = time.monotonic()
        user = _populate(rng, tmp)
        populate_s = time.monotonic() - started
        print(f"  populated in {populate_s:.1f} s", flush=True)

        series_ms = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            data = dashboard_data(tasks=dashboard_tasks(user=user), days=DAYS)
            series_ms.append((time.perf_counter() - t0) * 1000)
        assert data.totals["tasks"] == TASKS, data.totals

        client = Client(HTTP_HOST="127.0.0.1")
        client.force_login(user)
        page_ms = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            with CaptureQueriesContext(connection) as queries:
                response = client.get("/dashboard/")
            page_ms.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200 and b'id="chart-outcomes"' in response.content
        figures = {
            "tasks": TASKS,
            "events": TASKS * EVENTS_PER_TASK,
            "populate_s": round(populate_s, 1),
            "series_ms": summarize(series_ms),
            "page_ms": summarize(page_ms),
            "page_queries": len(queries),
            "page_bytes": len(response.content),
            "target_page_p90_ms": 500,
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
    series, page = figures["series_ms"], figures["page_ms"]
    report(
        "dashboard",
        figures,
        table=[
            ("tasks / events", f"{TASKS:,} / {TASKS * EVENTS_PER_TASK:,}"),
            ("series (6) median / p90", f"{series['median']:.1f} / {series['p90']:.1f} ms"),
            ("page median / p90", f"{page['median']:.1f} / {page['p90']:.1f} ms  (target ≤ 500)"),
            ("load average (1 min)", str(figures["load_average_1m"])),
            ("page queries / bytes", f"{figures['page_queries']} / {figures['page_bytes']:,}"),
        ],
    )
    return figures


if __name__ == "__main__":
    main()
