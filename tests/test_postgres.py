"""PostgreSQL through DATABASE_URL (psycopg 3): a real throwaway cluster, real migrations."""

from __future__ import annotations

import pytest

from tests.support import manage, server_env

pytestmark = pytest.mark.slow


def test_migrate_and_bootstrap_on_postgres(postgres_url, tmp_path):
    env = server_env(tmp_path, DATABASE_URL=postgres_url)
    migrated = manage(env, "migrate", "--noinput", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    first = manage(env, "bootstrap")
    assert first.returncode == 0, first.stderr
    again = manage(env, "bootstrap")
    assert again.returncode == 0 and "Found workspace 'demo'" in again.stdout
    query = manage(
        env,
        "shell",
        "-c",
        "from django.db import connection; from apps.tasks.models import Workspace; "
        "print(connection.vendor, Workspace.objects.get(name='demo').members.count())",
    )
    assert query.stdout.strip().splitlines()[-1].split() == ["postgresql", "1"], query.stderr


def shell_after_bootstrap(postgres_url: str, tmp_path, script: str):
    """`manage.py shell -c script` on the migrated and bootstrapped database."""
    env = server_env(tmp_path, DATABASE_URL=postgres_url)
    assert manage(env, "migrate", "--noinput", "-v", "0").returncode == 0
    assert manage(env, "bootstrap").returncode == 0
    result = manage(env, "shell", "-c", script)
    assert result.returncode == 0, result.stderr
    return result


WRITE_EVENTS = """
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from apps.tasks.events.event_writer import persist_batches
from apps.tasks.models import Task, TaskEvent, Workspace
user = get_user_model().objects.get(username="admin")
task = Task.objects.create(user=user, workspace=Workspace.objects.get(name="demo"), goal="g")
now = timezone.now()
events = [
    TaskEvent(task_id=task.pk, seq=1, type="task_started", data={"mode": "react"}, ts=now),
    TaskEvent(task_id=task.pk, seq=2, type="token", data={"text": "é ok"}, ts=now),
    TaskEvent(task_id=task.pk, seq=3, type="task_finished", ts=now, data={
        "status": "completed", "final": "done", "usage": {"output_tokens": 3}, "cost": 0.5}),
]
with transaction.atomic():
    persist_batches([(task.pk, events)])
task.refresh_from_db()
rows = list(TaskEvent.objects.filter(task=task).order_by("seq").values_list("seq", "type", "data"))
print(task.status, task.last_seq, task.result, task.usage, task.cost, task.error,
      task.started_at == now, task.finished_at == now, rows[1])
"""


def test_the_event_writer_stores_rows_and_status_on_postgres(postgres_url, tmp_path):
    """event_writer.persist_batches builds its own statements (the fields prepare the values):
    JSON, timestamps and the final status must come back as the ORM wrote them."""
    result = shell_after_bootstrap(postgres_url, tmp_path, WRITE_EVENTS)
    assert result.stdout.strip().splitlines()[-1] == (
        "completed 3 done {'output_tokens': 3} 0.5 None True True (2, 'token', {'text': 'é ok'})"
    )


CREATE_MANY = """
from django.contrib.auth import get_user_model
from apps.tasks.conf import agent_config
from apps.tasks.creation import TaskRequest, task_create_many
from apps.tasks.models import Conversation, Task, Workspace
user = get_user_model().objects.get(username="admin")
demo = Workspace.objects.get(name="demo")
tasks, conversations = Task.objects.count(), Conversation.objects.count()
first = task_create_many(requests=[TaskRequest(user, demo, "@chat hi", client_msg_id="m1")],
                         config=agent_config())[0]
out = task_create_many(requests=[
    TaskRequest(user, demo, "@react one", client_msg_id="m2"),
    TaskRequest(user, demo, "again", client_msg_id="m1"),
    TaskRequest(user, demo, "nul \\x00 byte"),
    TaskRequest(user, None, "@chat go on", conversation=first.conversation_id),
    TaskRequest(user, demo, "@react one", client_msg_id="m2"),
], config=agent_config())
made, resent, nul, cont, twice = out
print(made.pk is not None, made.conversation_id is not None, resent.pk == first.pk,
      nul.extra["error_code"], cont.conversation_id == first.conversation_id, twice is made,
      Task.objects.count() - tasks, Conversation.objects.count() - conversations,
      Task.objects.get(pk=made.pk).conversation.title)
"""


def test_tasks_created_together_get_their_ids_on_postgres(postgres_url, tmp_path):
    """creation.task_create_many inserts a batch's conversations and tasks in one statement
    each: PostgreSQL returns their ids (RETURNING), and a NUL byte, which it cannot store, is
    refused with its own error before the transaction."""
    result = shell_after_bootstrap(postgres_url, tmp_path, CREATE_MANY)
    assert result.stdout.strip().splitlines()[-1] == (
        "True True True invalid_field True True 3 2 one"
    )


RECYCLE = """
import asyncio
from asgiref.sync import sync_to_async
from django.db import connection
from apps.tasks.run.db_threads import RecyclingExecutor

def backend_pid():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]

def terminate(pid):  # the server drops the thread's connection (a restart, an idle timeout)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])

async def main():
    asyncio.get_running_loop().set_default_executor(
        RecyclingExecutor(max_workers=1, check_seconds=0)
    )
    first = await sync_to_async(backend_pid, thread_sensitive=False)()
    await sync_to_async(terminate, thread_sensitive=True)(first)  # another thread's connection
    second = await sync_to_async(backend_pid, thread_sensitive=False)()
    print("recycled", first != second)

asyncio.run(main())
"""


def test_a_pool_thread_whose_connection_the_server_dropped_gets_a_new_one(postgres_url, tmp_path):
    result = shell_after_bootstrap(postgres_url, tmp_path, RECYCLE)
    assert result.stdout.strip().splitlines()[-1] == "recycled True", result.stderr


LEASES = """
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from apps.tasks.events.ending import INTERRUPTED, task_end_now
from apps.tasks.dispatch.leases import lease_acquire, lease_release
from apps.tasks.dispatch.liveness import run_claim
from apps.tasks.models import Task, TaskEvent, Workspace
user = get_user_model().objects.get(username="admin")
ws = Workspace.objects.get(name="demo")
one, two = (Task.objects.create(user=user, workspace=ws, goal=g) for g in ("one", "two"))
claims = [run_claim(one.pk), run_claim(two.pk)]
print("first", lease_acquire(task_id=one.pk, workspace_id=ws.pk))
print("second", lease_acquire(task_id=two.pk, workspace_id=ws.pk).reason == f"waiting for task #{one.pk} on this workspace")
Task.objects.filter(pk=one.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
print("taken over", lease_acquire(task_id=two.pk, workspace_id=ws.pk))
ended = task_end_now(one.pk, "failed", INTERRUPTED)
print("ended", [m["type"] for m in ended], Task.objects.get(pk=one.pk).status)
print("again", task_end_now(one.pk, "failed", INTERRUPTED))
lease_release(task_id=two.pk, workspace_id=ws.pk)
print("seqs", list(TaskEvent.objects.filter(task=one).values_list("seq", flat=True)))
"""


def test_workspace_leases_and_the_minimal_end_on_postgres(postgres_url, tmp_path):
    result = shell_after_bootstrap(postgres_url, tmp_path, LEASES)
    lines = result.stdout.strip().splitlines()[-6:]
    assert lines == [
        "first None",
        "second True",
        "taken over None",
        "ended ['error', 'task_finished'] failed",
        "again None",
        "seqs [1, 2]",
    ], result.stderr
