"""Events at a year's scale (issue 41): 2,000,000 event rows on PostgreSQL — 10,000 finished
tasks of 200 events each (task_started; 33 steps of 4 batched `token` events, a tool_call and
its tool_result; task_finished), made with generate_series in one statement — then the time of
what people wait for (target p95 ≤ 200 ms each):

- the chat's replay of a task: `GET /api/tasks/<id>/events?after=0` (the rows a socket replays,
  as the API sends them), for random tasks;
- the dashboard's pages: `/dashboard/?days=7`, `/dashboard/?days=30`, `/evaluations/`;

before and after `events.retention: 7` folded the tasks finished over a week ago (about 90%) (ops/retention.py; its rows removed and
its rate are figures too), and the table's size. In process (Django test client), on a private
PostgreSQL cluster (tests/services.py). AGENTKIT_BENCH_EVENTS_TASKS changes the task count.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

TASKS = int(os.environ.get("AGENTKIT_BENCH_EVENTS_TASKS", "10000"))
EVENTS_PER_TASK = 200
REPLAYS = 60
RETENTION_DAYS = 7  # events.retention: tasks finished over a week ago are folded (~90%)
PAGE_RUNS = 20
PAGES = ("/dashboard/?days=7", "/dashboard/?days=30", "/evaluations/")

EVENTS_SQL = """
INSERT INTO tasks_taskevent (task_id, seq, type, data, ts)
SELECT t.id, s,
  CASE WHEN s = 1 THEN 'task_started' WHEN s = %(n)s THEN 'task_finished'
       WHEN (s - 2) %% 6 < 4 THEN 'token' WHEN (s - 2) %% 6 = 4 THEN 'tool_call'
       ELSE 'tool_result' END,
  CASE WHEN s = 1 THEN jsonb_build_object('mode', 'react', 'goal', t.goal)
       WHEN s = %(n)s THEN jsonb_build_object('status', t.status, 'final', 'done')
       WHEN (s - 2) %% 6 < 4 THEN jsonb_build_object('step', (s - 2) / 6 + 1,
            'text', 'a piece of the streamed answer of this step, chunk ' || s || '. ')
       WHEN (s - 2) %% 6 = 4 THEN jsonb_build_object('step', (s - 2) / 6 + 1,
            'call_id', 'c' || s, 'name', 'read_file', 'arguments', '{"path": "README.md"}'::jsonb)
       ELSE jsonb_build_object('step', (s - 2) / 6 + 1, 'call_id', 'c' || (s - 1),
            'name', 'read_file', 'ok', true, 'output', repeat('line of the file\n', 20),
            'duration_ms', 3.5) END,
  t.finished_at - make_interval(secs => %(n)s - s)
FROM tasks_task t CROSS JOIN generate_series(1, %(n)s) AS s
WHERE t.workspace_id = %(workspace)s
"""


def _setup(stack: ExitStack, tmp: Path) -> str:
    from tests.services import private_postgres

    url = stack.enter_context(private_postgres(tmp))
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentkit_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    return url


def _populate(rng: random.Random, tmp: Path):
    from django.db import connection
    from django.utils import timezone

    from apps.tasks.models import Task
    from tests.tasks.factories import make_user, make_workspace

    user = make_user("bench")
    workspace = make_workspace("bench", tmp, user)
    now = timezone.now()
    statuses = ["completed"] * 7 + ["failed", "gave_up_after_reflections", "cancelled"]
    tasks = []
    for i in range(TASKS):
        created = now - timedelta(days=rng.uniform(0, 60))
        tasks.append(
            Task(
                user=user,
                workspace=workspace,
                mode="react",
                goal=f"task {i}: fix the thing",
                status=rng.choice(statuses),
                usage={"input_tokens": 20_000, "output_tokens": 900, "llm_calls": 34},
                cost=0.02,
                last_seq=EVENTS_PER_TASK,
                finished_at=created + timedelta(minutes=5),
            )
        )
    Task.objects.bulk_create(tasks, batch_size=2_000)
    for task in tasks:
        task.created_at = task.finished_at - timedelta(minutes=5)
    Task.objects.bulk_update(tasks, ["created_at"], batch_size=2_000)
    with connection.cursor() as cursor:
        cursor.execute(EVENTS_SQL, {"n": EVENTS_PER_TASK, "workspace": workspace.pk})
        cursor.execute("ANALYZE tasks_taskevent")
        cursor.execute("ANALYZE tasks_task")
    return user, [task.pk for task in tasks]


def _table() -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tasks_taskevent")
        rows = cursor.fetchone()[0]
        cursor.execute("SELECT pg_total_relation_size('tasks_taskevent')")
        size = cursor.fetchone()[0]
    return {"rows": rows, "total_mb": round(size / 2**20, 1)}


def _stats(values: list[float]) -> dict:
    from bench._harness import percentile, summarize

    return {
        k: round(v, 2) for k, v in {**summarize(values), "p95": percentile(values, 0.95)}.items()
    }


def _measure(client, rng: random.Random, task_ids: list[int]) -> dict:
    replay_ms, events = [], []
    for task_id in rng.sample(task_ids, REPLAYS):
        t0 = time.perf_counter()
        response = client.get(f"/api/tasks/{task_id}/events?after=0")
        replay_ms.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.content[:200]
        events.append(len(response.json()["events"]))
    pages = {}
    for page in PAGES:
        times = []
        for _ in range(PAGE_RUNS):
            t0 = time.perf_counter()
            response = client.get(page)
            times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200, (page, response.status_code)
        pages[page] = _stats(times)
    return {
        "replay_ms": _stats(replay_ms),
        "replay_events_per_task": round(sum(events) / len(events), 1),
        "pages_ms": pages,
        "pages_p95_max_ms": max(times["p95"] for times in pages.values()),
        "table": _table(),
    }


def main() -> dict:
    from bench._harness import report

    rng = random.Random(41)
    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp_name, ExitStack() as stack:
        tmp = Path(tmp_name)
        _setup(stack, tmp)
        from django.test import Client

        from apps.tasks.ops.retention import FOLD_CHUNK, due, fold_tasks

        started = time.monotonic()
        user, task_ids = _populate(rng, tmp)
        populate_s = time.monotonic() - started
        print(f"  populated in {populate_s:.1f} s", flush=True)
        client = Client(HTTP_HOST="127.0.0.1")
        client.force_login(user)
        _measure(client, random.Random(1), task_ids)  # warm: caches, connections, templates
        before = _measure(client, rng, task_ids)

        started = time.monotonic()
        folded = removed = 0
        while batch := due(RETENTION_DAYS, limit=1000):
            for start in range(0, len(batch), FOLD_CHUNK):
                removed += fold_tasks(batch[start : start + FOLD_CHUNK])
            folded += len(batch)
        fold_s = time.monotonic() - started
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE tasks_taskevent")  # as autovacuum would, after
            cursor.execute("VACUUM ANALYZE tasks_task")
        after = _measure(client, rng, task_ids)
        connection.close()

    worst = max(
        [before["replay_ms"]["p95"], after["replay_ms"]["p95"]]
        + [p["p95"] for p in before["pages_ms"].values()]
        + [p["p95"] for p in after["pages_ms"].values()]
    )
    figures = {
        "tasks": TASKS,
        "events": TASKS * EVENTS_PER_TASK,
        "populate_s": round(populate_s, 1),
        "before_retention": before,
        "after_retention": after,
        "retention": {
            "tasks_folded": folded,
            "rows_removed": removed,
            "seconds": round(fold_s, 1),
            "tasks_per_second": round(folded / fold_s, 1) if fold_s else None,
        },
        "worst_p95_ms": round(worst, 1),
        "target_p95_ms": 200,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    rows = [("event rows", f"{before['table']['rows']:,} → {after['table']['rows']:,}")]
    for name, run in (("before", before), ("after", after)):
        rows.append((f"replay p95 ({name})", f"{run['replay_ms']['p95']:.1f} ms"))
        for page, times in run["pages_ms"].items():
            rows.append((f"{page} p95 ({name})", f"{times['p95']:.1f} ms"))
    rows.append(("folding", f"{folded} tasks in {fold_s:.1f} s"))
    rows.append(("worst p95", f"{worst:.1f} ms (target ≤ 200)"))
    report("events", figures, table=rows)
    return figures


if __name__ == "__main__":
    main()
