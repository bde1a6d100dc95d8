"""Seed 000 U2 parity: the same failing task sent over the WebSocket and through the JSON API is
scheduled the same way at its end, and the worker learns the same lessons from both."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from agentkit_site.asgi import application
from apps.evolution.models import Lesson
from apps.tasks.models import FINAL_STATUSES, Task
from tests.evolution.conftest import GOAL, drain, gives_up_config, restore_demo

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1:8000")


def _cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    value = client.cookies[settings.SESSION_COOKIE_NAME].value
    return (b"cookie", f"{settings.SESSION_COOKIE_NAME}={value}".encode())


async def _over_websocket(user) -> int:
    cookie = await sync_to_async(_cookie)(user)
    socket = WebsocketCommunicator(application, "/ws/chat/", headers=[ORIGIN, cookie])
    connected, _ = await socket.connect()
    assert connected
    try:
        await socket.send_json_to(
            {"type": "user_message", "text": GOAL, "mode": "plan_exec", "client_msg_id": "p1"}
        )
        while True:
            frame = await socket.receive_json_from(timeout=120)
            if frame["type"] == "task_finished":
                return frame["task_id"]
    finally:
        await socket.disconnect()


def _over_json_api(user, workspace, queue) -> int:
    client = Client()
    client.force_login(user)
    response = client.post(
        "/api/tasks",
        {"workspace": workspace.name, "text": GOAL, "mode": "plan_exec"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    task_id = response.json()["id"]
    deadline = time.monotonic() + 120
    while Task.objects.get(pk=task_id).status not in FINAL_STATUSES:
        assert time.monotonic() < deadline, "the API task did not finish"
        time.sleep(0.1)
    while queue.count < 2:  # the lifecycle hook schedules right after writing the status
        assert time.monotonic() < deadline, "the API task was not scheduled"
        time.sleep(0.05)
    return task_id


def test_websocket_and_json_api_tasks_are_scheduled_and_learned_from_alike(
    demo, config_file, evolution_queue
):
    user, workspace, root = demo
    config_file(gives_up_config())

    socket_task = asyncio.run(_over_websocket(user))
    restore_demo(root)
    api_task = _over_json_api(user, workspace, evolution_queue)

    assert sorted(evolution_queue.job_ids) == sorted(
        [f"evolve-task-{socket_task}", f"evolve-task-{api_task}"]
    )
    assert drain(evolution_queue) == 2
    learned = {
        task_id: sorted(
            Lesson.objects.filter(task_id=task_id).values_list("category", "pitfall__trigger")
        )
        for task_id in (socket_task, api_task)
    }
    assert learned[socket_task] and learned[socket_task] == learned[api_task]
    for task_id in (socket_task, api_task):
        assert Task.objects.get(pk=task_id).status == "gave_up_after_reflections"
