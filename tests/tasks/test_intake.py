"""Messages of several sockets become tasks together (apps/tasks/creation.py task_create_many,
apps/tasks/doors/intake.py): one transaction and one INSERT per table for a batch, each message's own
outcome (its task, the task it re-sent, or its error) whatever the others' are. Counted on
SQLite's own trace of the statements it executes, on a real database file."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import DatabaseError, connection
from django.db.backends.signals import connection_created

from apps.tasks.conf import agent_config
from apps.tasks.creation import TaskRequest, task_create_many
from apps.tasks.doors.intake import intake
from apps.tasks.models import Conversation, Task, Workspace
from apps.tasks.services import ApplicationError, task_create
from tests.tasks.factories import make_task
from tests.tasks.test_consumer import (  # noqa: F401  (people: a fixture)
    expect_error,
    open_socket,
    people,
    still_works,
)

pytestmark = pytest.mark.django_db(transaction=True)


def traced(call):
    """Run `call` on this thread's connection; its result and the statements SQLite ran."""
    connection.ensure_connection()
    executed: list[str] = []
    connection.connection.set_trace_callback(executed.append)
    try:
        result = call()
    finally:
        connection.connection.set_trace_callback(None)
    return result, executed


def inserts_into(executed: list[str], model) -> list[str]:
    into = f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} "
    return [sql for sql in executed if sql.startswith(into)]


def test_a_batch_is_one_transaction_and_each_message_gets_its_own_outcome(people):  # noqa: F811
    alice, bob, alpha, beta = people["alice"], people["bob"], people["alpha"], people["beta"]
    earlier = task_create(
        user=alice, workspace=alpha, text="@chat first", client_msg_id="m-1", config=agent_config()
    )
    ongoing = make_task(bob, beta, goal="earlier turn")
    ongoing.conversation = Conversation.objects.create(user=bob, workspace=beta, title="t")
    ongoing.save()

    def ask(user, text, **fields):
        return TaskRequest(user=user, workspace=fields.pop("workspace", None), text=text, **fields)

    requests = [
        ask(alice, "@react fix the test", workspace=alpha, client_msg_id="m-2"),
        ask(alice, "resent", workspace=alpha, client_msg_id="m-1"),  # created before the batch
        ask(bob, "@skill:nope hello", workspace=beta),
        ask(alice, "x" * 100_000, workspace=alpha),
        ask(alice, "not mine", workspace=beta),
        ask(bob, "@chat go on", conversation=ongoing.conversation_id),
        ask(alice, "twice in one batch", workspace=alpha, client_msg_id="m-3"),
        ask(alice, "twice in one batch", workspace=alpha, client_msg_id="m-3"),
        ask(bob, "@plan a plan", workspace=beta, mode="react"),
    ]

    outcomes, executed = traced(lambda: task_create_many(requests=requests, config=agent_config()))

    made, resent, skill, too_long, foreign, continued, first, again, planned = outcomes
    assert isinstance(made, Task) and made.mode == "react" and made.goal == "fix the test"
    assert resent.pk == earlier.pk
    assert all(isinstance(e, ApplicationError) for e in (skill, too_long, foreign))
    assert skill.extra["error_code"] == "unknown_skill"
    assert too_long.extra["error_code"] == "message_too_long"
    assert foreign.extra["error_code"] == "not_found"
    assert continued.conversation_id == ongoing.conversation_id and continued.workspace == beta
    assert first.pk == again.pk
    assert planned.mode == "plan_exec" and planned.user == bob
    # Stored, each with the conversation it opened (or continued), and nothing for the errors.
    assert Task.objects.count() == 1 + 1 + 4  # earlier, ongoing, and the four created
    for task in (made, first, planned):
        stored = Task.objects.get(pk=task.pk)
        assert stored.conversation.workspace_id == stored.workspace_id
        assert stored.conversation.title == stored.goal
        assert task.opens_conversation is True
    assert continued.opens_conversation is False
    assert Conversation.objects.filter(tasks__isnull=True).count() == 0
    # One write transaction: one INSERT for the conversations, one for the tasks.
    assert sum(1 for sql in executed if sql.upper().startswith("BEGIN")) == 1, executed
    assert len(inserts_into(executed, Task)) == 1, executed
    assert len(inserts_into(executed, Conversation)) == 1, executed


def test_a_message_whose_rows_the_database_refuses_fails_alone(people):  # noqa: F811
    """A real refusal by the database (a trigger standing in for a constraint) in the middle of
    a batch: the batch's transaction is rolled back, then each message is created on its own."""
    alice, alpha = people["alice"], people["alpha"]
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON tasks_task WHEN NEW.goal = 'boom' "
            "BEGIN SELECT RAISE(ABORT, 'refused by the database'); END"
        )
    try:
        outcomes = task_create_many(
            requests=[
                TaskRequest(user=alice, workspace=alpha, text=text)
                for text in ("@chat one", "@chat boom", "@chat three")
            ],
            config=agent_config(),
        )
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER refuse_boom")
    one, boom, three = outcomes
    assert isinstance(boom, DatabaseError) and "refused by the database" in str(boom)
    assert sorted(Task.objects.values_list("goal", flat=True)) == ["one", "three"]
    assert {one.goal, three.goal} == {"one", "three"}
    assert Conversation.objects.count() == 2  # none left behind by the refused message


async def test_sockets_sending_together_share_a_transaction_and_each_follows_its_task(
    people,  # noqa: F811
    config_file,
    tmp_path,
):
    script = tmp_path / "script.yaml"
    script.write_text("- match: '(?i)hello'\n  repeat: true\n  text: Hi there.\n")
    config_file(f"models: {{main: {{provider: scripted, script: {script}}}}}\n")
    inserts: list[str] = []

    def trace(sender, connection, **kwargs):  # the worker threads' connections, opened here
        if connection.vendor == "sqlite":
            connection.connection.set_trace_callback(
                lambda sql: inserts.append(sql) if sql.upper().startswith("INSERT") else None
            )

    connection_created.connect(trace)
    try:
        users = [people["alice"]] * 5 + [people["bob"]] * 3
        sockets = [await open_socket(user) for user in users]
        texts = [f"@chat hello {i}" for i in range(len(sockets))]
        texts[6] = "@skill:nope hello"  # one of bob's: its error, and the others still run
        await asyncio.gather(
            *(
                s.send_json_to({"type": "user_message", "text": t, "client_msg_id": f"c{i}"})
                for i, (s, t) in enumerate(zip(sockets, texts, strict=True))
            )
        )
        seen: dict[int, list[dict]] = {}
        for index, socket in enumerate(sockets):
            frames = []
            while True:
                frame = await socket.receive_json_from(timeout=20)
                frames.append(frame)
                if frame["type"] in ("task_finished", "error"):
                    break
            seen[index] = frames
        for socket in sockets:
            await socket.disconnect()
    finally:
        connection_created.disconnect(trace)

    assert seen[6][-1]["data"]["error_struct"]["error_code"] == "unknown_skill"
    task_ids = set()
    for index, frames in seen.items():
        if index == 6:
            continue
        task_id = frames[0]["task_id"]
        assert {f["task_id"] for f in frames} == {task_id}  # its own task's events only
        assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
        assert frames[0]["type"] == "task_started" and frames[-1]["data"]["status"] == "completed"
        task_ids.add(task_id)
    assert len(task_ids) == 7
    owners = await sync_to_async(lambda: dict(Task.objects.values_list("pk", "user__username")))()
    assert sorted(owners[t] for t in task_ids) == ["alice"] * 5 + ["bob"] * 2
    task_inserts = inserts_into(inserts, Task)
    # Eight messages sent together: their tasks went in a few INSERTs (one per batch), not eight.
    assert 1 <= len(task_inserts) <= 3, task_inserts


async def test_a_workspace_whose_repository_map_is_slow_delays_no_one_else(
    people,  # noqa: F811
    config_file,
    tmp_path,
):
    """alice's workspace takes most of a second to map; bob's message, sent while her run is
    being prepared, starts without waiting for that map."""
    script = tmp_path / "script.yaml"
    script.write_text("- match: '(?i)hello'\n  repeat: true\n  text: Hi there.\n")
    config_file(
        f"models: {{main: {{provider: scripted, script: {script}}}}}\n"
        "repo_map: {max_tokens: 100000, time_limit_seconds: 30}\n"
    )
    big = tmp_path / "a"
    for index in range(3000):
        package = big / f"p{index % 30}"
        package.mkdir(exist_ok=True)
        (package / f"m{index}.py").write_text(f"def f{index}():\n    return {index}\n" * 20)
    (tmp_path / "b" / "README.md").write_text("small\n")
    alice = await open_socket(people["alice"])
    bob = await open_socket(people["bob"])
    arrivals: list[tuple[str, str]] = []

    async def follow(name, socket):
        while True:
            frame = await socket.receive_json_from(timeout=30)
            arrivals.append((name, frame["type"]))
            if frame["type"] in ("task_finished", "error"):
                return frame

    await alice.send_json_to({"type": "user_message", "text": "@react hello big"})
    await asyncio.sleep(0.1)  # her task exists; its run is being prepared
    await bob.send_json_to({"type": "user_message", "text": "@react hello small"})
    ends = await asyncio.gather(follow("alice", alice), follow("bob", bob))
    for socket in (alice, bob):
        await socket.disconnect()

    assert [end["data"]["status"] for end in ends] == ["completed", "completed"]
    assert arrivals.index(("bob", "task_started")) < arrivals.index(("alice", "task_started"))


async def test_a_message_the_database_refuses_gets_an_error_frame_and_its_socket_stays_open(
    people,  # noqa: F811
    config_file,
    tmp_path,
):
    script = tmp_path / "script.yaml"
    script.write_text("- match: '(?i)hello'\n  repeat: true\n  text: Hi there.\n")
    config_file(f"models: {{main: {{provider: scripted, script: {script}}}}}\n")

    def refuse(create: bool):
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE TRIGGER refuse_boom BEFORE INSERT ON tasks_task WHEN NEW.goal = 'boom' "
                "BEGIN SELECT RAISE(ABORT, 'refused by the database'); END"
                if create
                else "DROP TRIGGER refuse_boom"
            )

    await sync_to_async(refuse)(True)
    try:
        refused, fine = await open_socket(people["alice"]), await open_socket(people["alice"])
        await asyncio.gather(
            refused.send_json_to({"type": "user_message", "text": "@chat boom"}),
            fine.send_json_to({"type": "user_message", "text": "@chat hello"}),
        )
        await expect_error(refused, "task_not_stored")
        await still_works(refused)
        while (frame := await fine.receive_json_from(timeout=20))["type"] != "task_finished":
            pass
        assert frame["data"]["status"] == "completed"
        for socket in (refused, fine):
            await socket.disconnect()
    finally:
        await sync_to_async(refuse)(False)
    goals = await sync_to_async(lambda: list(Task.objects.values_list("goal", flat=True)))()
    assert goals == ["hello"]


def test_a_workspace_found_among_the_users_own_is_not_checked_again(people):  # noqa: F811
    """The intake looks a message's workspace up among the user's own workspaces; creation then
    reads no membership row for it. Without that lookup (member_checked False), or for a
    workspace the user does not belong to, the membership is read, and refused."""
    alice, alpha, beta = people["alice"], people["alpha"], people["beta"]
    members = Workspace.members.through._meta.db_table

    def membership_reads(request):
        outcomes, executed = traced(
            lambda: task_create_many(requests=[request], config=agent_config())
        )
        return outcomes[0], [sql for sql in executed if members in sql]

    made, reads = membership_reads(
        TaskRequest(user=alice, workspace=alpha, text="@chat one", member_checked=True)
    )
    assert isinstance(made, Task) and reads == []
    made, reads = membership_reads(TaskRequest(user=alice, workspace=alpha, text="@chat two"))
    assert isinstance(made, Task) and len(reads) == 1
    refused, reads = membership_reads(TaskRequest(user=alice, workspace=beta, text="@chat three"))
    assert isinstance(refused, ApplicationError) and len(reads) == 1


async def test_messages_arriving_while_batches_are_in_flight_all_get_their_tasks(
    people,  # noqa: F811
):
    """Messages sent one after another while the intake's thread is creating earlier batches:
    the thread takes each next batch itself, and none is left waiting (each gets its task, in
    few batches)."""
    alice = people["alice"]
    inserts: list[str] = []

    def trace(sender, connection, **kwargs):
        if connection.vendor == "sqlite":
            connection.connection.set_trace_callback(
                lambda sql: inserts.append(sql) if sql.upper().startswith("INSERT") else None
            )

    async def send(index: int):
        await asyncio.sleep(0.002 * (index % 10))  # in waves, some while a batch is in flight
        content = {"text": f"@chat message {index}", "client_msg_id": f"w{index}"}
        return await intake().create(user=alice, content=content)

    connection_created.connect(trace)
    try:
        async with asyncio.timeout(30):
            created = await asyncio.gather(*(send(i) for i in range(40)))
    finally:
        connection_created.disconnect(trace)
    goals = {c.task.goal for c in created}
    assert goals == {f"message {i}" for i in range(40)}
    assert all(c.submitted for c in created)
    stored = await sync_to_async(lambda: set(Task.objects.values_list("goal", flat=True)))()
    assert stored == goals
    assert 1 <= len(inserts_into(inserts, Task)) < 40
