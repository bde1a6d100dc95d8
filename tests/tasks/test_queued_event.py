"""With executor rq, a new task's first event says at once that it waits for a free worker
(apps/tasks/dispatch/queued.py): seq 1 `task_waiting`, written by the process that enqueues the job, before
any worker runs it. The run continues the seqs after it. A real Redis (its own database number),
the test database, the real RQ queue; the jobs run by RQ's own worker, in burst mode."""

from __future__ import annotations

import asyncio
import re

import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings as django_settings
from django.test import Client
from rq import Queue, SimpleWorker

from apps.tasks.conf import reload_agent_config
from apps.tasks.dispatch.queued import WORKER_WAIT_REASON
from apps.tasks.doors.intake import intake
from apps.tasks.models import Task, TaskEvent
from apps.tasks.run.executors import task_enqueue_rq, task_submit, task_submit_many
from apps.tasks.services import task_request_cancel
from tests.tasks.factories import add_events, make_task, make_workspace
from tests.tasks.test_consumer import open_socket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rq_queue(settings, redis_url):
    """executor rq on a Redis database of this test's own: (the queue `agent`, its URL)."""
    url = re.sub(r"/\d+$", "/12", redis_url)
    connection = redis.Redis.from_url(url)
    connection.flushdb()
    settings.REDIS_URL = url
    settings.AGENTKIT_EXECUTOR = "rq"
    reload_agent_config()
    # django_rq reads RQ_QUEUES once, at start-up, and keeps its queues' dicts: the queues' URL
    # is changed in those dicts (ours, from settings.py), and put back after the test.
    queues = django_settings.RQ_QUEUES
    before = {name: queue["URL"] for name, queue in queues.items()}
    for queue in queues.values():
        queue["URL"] = url
    try:
        yield Queue("agent", connection=connection)
    finally:
        for name, queue in queues.items():
            queue["URL"] = before[name]
        connection.flushdb()
        settings.AGENTKIT_EXECUTOR = ""
        reload_agent_config()


def _events(task) -> list[TaskEvent]:
    return list(TaskEvent.objects.filter(task=task).order_by("seq"))


def test_a_task_sent_to_the_workers_says_at_once_that_it_waits_for_one(demo, rq_queue):
    user, workspace, _ = demo
    first = make_task(user, workspace, goal="hello", mode="direct_chat")
    second = make_task(user, workspace, goal="hello again", mode="direct_chat")
    task_submit(task_id=first.pk)
    task_submit(task_id=second.pk)

    assert rq_queue.count == 2  # no worker yet: both wait
    for task, ahead in ((first, 0), (second, 1)):
        [event] = _events(task)
        assert (event.seq, event.type) == (1, "task_waiting")
        assert event.data == {
            "reason": WORKER_WAIT_REASON,
            "waiting_for": None,
            "ahead": ahead,
            "queue": "agent",
            "goal": task.goal,
            "mode": "direct_chat",
        }
        stored = Task.objects.get(pk=task.pk)
        assert (stored.status, stored.last_seq) == ("queued", 1)

    # A worker runs them: each run goes on after the queued event, seqs contiguous, one end.
    SimpleWorker([rq_queue], connection=rq_queue.connection).work(burst=True)
    for task in (first, second):
        events = _events(task)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        kinds = [e.type for e in events]
        assert kinds[:2] == ["task_waiting", "task_started"], kinds
        assert kinds.count("task_waiting") == 1 and kinds.count("task_finished") == 1
        assert kinds[-1] == "task_finished"
        assert Task.objects.get(pk=task.pk).status == "completed"


def test_tasks_created_together_are_queued_together_in_order(demo, rq_queue):
    """A burst of messages (intake.py): their events in one transaction, their jobs in one round
    trip, each told how many jobs are ahead of it."""
    user, workspace, _ = demo
    task_submit(task_id=make_task(user, workspace, goal="before", mode="direct_chat").pk)
    burst = [make_task(user, workspace, goal=f"burst {i}", mode="direct_chat") for i in range(3)]
    task_submit_many(tasks=burst)

    assert rq_queue.job_ids[1:] == [f"task-{task.pk}-1" for task in burst]
    for ahead, task in enumerate(burst, start=1):
        [event] = _events(task)
        assert (event.seq, event.type, event.data["ahead"]) == (1, "task_waiting", ahead)
        assert event.data["goal"] == task.goal
        assert Task.objects.get(pk=task.pk).last_seq == 1


def test_messages_sent_together_queue_their_jobs_in_the_order_they_came(demo, rq_queue, tmp_path):
    """Messages to two workspaces, alternately, in one intake batch: their jobs queue in the
    order of the messages, not one workspace's after the other's (the workers taking a
    workspace's jobs side by side would wait on its lease one after another)."""
    user, demo_workspace, _ = demo
    (tmp_path / "other").mkdir()
    other = make_workspace("other", tmp_path / "other", user)
    spaces = [demo_workspace, other] * 3

    def message(i: int, space) -> dict:
        return {
            "text": f"message {i}",
            "workspace": space.pk,
            "mode": "direct_chat",
            "client_msg_id": f"together-{i}",
        }

    async def send_all():
        messages = [message(i, space) for i, space in enumerate(spaces)]
        return await asyncio.gather(*(intake().create(user=user, content=m) for m in messages))

    made = async_to_sync(send_all)()
    ids = [created.task.pk for created in made if created.submitted]
    assert len(ids) == 6 and ids == sorted(ids)
    assert rq_queue.job_ids == [f"task-{task_id}-1" for task_id in ids]
    assert [_events(Task.objects.get(pk=i))[0].data["ahead"] for i in ids] == list(range(6))
    # each socket gets its task's stored seq 1 in hand, to send without reading it back
    for created in made:
        (stored,) = _events(created.task)
        assert created.events == [stored.as_message()]


def test_a_message_sent_again_while_its_task_waits_is_not_queued_twice(demo, rq_queue):
    """The same client_msg_id again (a socket reconnecting and sending again) while the first
    task still waits for a worker, with its queued event stored: the same task, not submitted
    again, one job, one event."""
    user, workspace, _ = demo
    message = {"text": "once", "workspace": workspace.pk, "mode": "direct_chat"}
    message["client_msg_id"] = "again-1"

    async def send():
        return await intake().create(user=user, content=message)

    first = async_to_sync(send)()
    again = async_to_sync(send)()
    assert first.submitted and len(first.events) == 1
    assert again.task.pk == first.task.pk and not again.submitted and again.events == []
    assert rq_queue.job_ids == [f"task-{first.task.pk}-1"]
    assert [event.type for event in _events(first.task)] == ["task_waiting"]


def test_a_task_with_a_history_gets_no_second_queued_event(demo, rq_queue):
    """A take-over (a reason given) or any task that already has events: its run says why."""
    user, workspace, _ = demo
    task = make_task(user, workspace, goal="hello", mode="direct_chat")
    add_events(task, "task_started")
    task_enqueue_rq(task_id=task.pk, queue="agent", reason="taken over automatically: test")
    fresh = make_task(user, workspace, goal="hello", mode="direct_chat")
    task_enqueue_rq(task_id=fresh.pk, queue="agent", reason="taken over automatically: test")

    assert [e.type for e in _events(task)] == ["task_started"]
    assert _events(fresh) == []
    assert rq_queue.count == 2  # enqueued all the same


def test_a_queued_task_cancelled_before_a_worker_took_it_ends_after_its_queued_event(
    demo, rq_queue
):
    user, workspace, _ = demo
    task = make_task(user, workspace, goal="hello", mode="direct_chat")
    task_submit(task_id=task.pk)
    assert task_request_cancel(task=Task.objects.get(pk=task.pk))

    SimpleWorker([rq_queue], connection=rq_queue.connection).work(burst=True)
    events = _events(task)
    assert [(e.seq, e.type) for e in events] == [(1, "task_waiting"), (2, "task_finished")]
    assert events[1].data["status"] == "cancelled"
    assert Task.objects.get(pk=task.pk).status == "cancelled"


def test_the_json_api_answers_with_the_queued_event_already_stored(demo, rq_queue):
    user, workspace, _ = demo
    client = Client()
    client.force_login(user)
    response = client.post(
        "/api/tasks",
        {"text": "hello", "mode": "direct_chat", "workspace": workspace.pk},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    task_id = response.json()["id"]
    events = client.get(f"/api/tasks/{task_id}/events").json()["events"]
    assert [(e["seq"], e["type"]) for e in events] == [(1, "task_waiting")]
    assert events[0]["data"]["reason"] == WORKER_WAIT_REASON


def test_a_json_api_post_sent_again_answers_with_its_task_and_queues_nothing(demo, rq_queue):
    """A client whose answer was lost (its web process died) posts again with the same
    client_msg_id: 200 with the first task, not a second task, job or event."""
    user, workspace, _ = demo
    client = Client()
    client.force_login(user)
    body = {"text": "hello", "mode": "direct_chat", "workspace": workspace.pk}
    body["client_msg_id"] = "post-1"
    first = client.post("/api/tasks", body, content_type="application/json")
    again = client.post("/api/tasks", body, content_type="application/json")
    assert (first.status_code, again.status_code) == (201, 200), again.content
    assert again.json()["id"] == first.json()["id"]
    assert rq_queue.job_ids == [f"task-{first.json()['id']}-1"]
    assert Task.objects.filter(client_msg_id="post-1").count() == 1
    assert [e.type for e in _events(Task.objects.get(pk=first.json()["id"]))] == ["task_waiting"]


def test_a_socket_gets_the_queued_event_as_its_first_frame_with_no_worker_running(demo, rq_queue):
    user, workspace, _ = demo

    async def send() -> dict:
        socket = await open_socket(user)
        try:
            await socket.send_json_to(
                {"type": "user_message", "text": "hello", "workspace": workspace.pk,
                 "mode": "direct_chat", "client_msg_id": "q-1"}
            )  # fmt: skip
            while True:
                frame = await socket.receive_json_from(timeout=10)
                if frame.get("seq"):
                    return frame
        finally:
            await socket.disconnect()

    frame = async_to_sync(send)()
    assert (frame["seq"], frame["type"]) == (1, "task_waiting")
    assert frame["data"]["reason"] == WORKER_WAIT_REASON and frame["data"]["ahead"] == 0
    assert rq_queue.count == 1
