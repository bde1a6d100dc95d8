"""The batched event write path on a real PostgreSQL (psycopg 3): 20 concurrent tasks, one
transaction per batch of several tasks, contiguous seqs, last_seq in step."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.support import manage, server_env

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import asyncio, json
    from asgiref.sync import sync_to_async
    from apps.tasks.events.event_writer import event_writer
    from apps.tasks.models import Task, TaskEvent
    from apps.tasks.events.recorder import EventRecorder
    from tests.tasks.factories import make_task, make_user, make_workspace

    def setup():
        user = make_user("pg-writer")
        workspace = make_workspace("pg", "/tmp", user)
        ids = [make_task(user, workspace, goal=f"g{i}").pk for i in range(20)]
        return list(Task.objects.select_related("workspace").filter(pk__in=ids).order_by("pk"))

    async def one(task):
        recorder = EventRecorder(task, flush_interval_ms=20)
        await recorder.record("task_started", {})
        for i in range(40):
            await recorder.record("token", {"step": 1, "text": str(i)})
            if i % 8 == 0:
                await asyncio.sleep(0.01)
        await recorder.record("task_finished", {"status": "completed"})
        await recorder.aclose()

    async def main():
        tasks = await sync_to_async(setup)()
        await asyncio.gather(*(one(t) for t in tasks))
        def check():
            return {
                str(t.pk): [
                    list(TaskEvent.objects.filter(task=t).order_by("seq").values_list("seq", flat=True)),
                    Task.objects.get(pk=t.pk).last_seq,
                ]
                for t in tasks
            }
        return await sync_to_async(check)()

    result = asyncio.run(main())
    print("RESULT " + json.dumps({"tasks": result, "transactions": event_writer().transactions}))
    """
)


def test_twenty_concurrent_tasks_bulk_write_events_on_postgres(migrated_postgres_url, tmp_path):
    env = server_env(tmp_path, DATABASE_URL=migrated_postgres_url)
    ran = manage(env, "shell", "-c", SCRIPT)
    assert ran.returncode == 0, ran.stderr
    line = next(x for x in ran.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert len(result["tasks"]) == 20
    for seqs, last_seq in result["tasks"].values():
        assert seqs == list(range(1, 43)) and last_seq == 42
    assert result["transactions"] < 20 * 42 / 4  # batched, across tasks too
