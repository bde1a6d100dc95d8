"""ChatConsumer through the real ASGI stack: access rules, bad frames, replay exactly once."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from agentkit_site.asgi import application
from apps.tasks.doors import consumers
from apps.tasks.doors.consumers import task_group
from apps.tasks.events.local_delivery import followers
from apps.tasks.models import Task
from tests.tasks.factories import add_events, make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1:8000")


def _cookie_for(user):
    client = Client()
    client.force_login(user)
    return (
        b"cookie",
        f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode(),
    )


async def open_socket(user, path: str = "/ws/chat/") -> WebsocketCommunicator:
    cookie = await sync_to_async(_cookie_for)(user)
    communicator = WebsocketCommunicator(application, path, headers=[ORIGIN, cookie])
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.fixture
def people(tmp_path):
    (tmp_path / "a").mkdir(exist_ok=True)  # the workspaces' directories: their tasks can run
    (tmp_path / "b").mkdir(exist_ok=True)
    alice, bob = make_user("alice"), make_user("bob")
    return {
        "alice": alice,
        "bob": bob,
        "alpha": make_workspace("alpha", tmp_path / "a", alice),
        "beta": make_workspace("beta", tmp_path / "b", bob),
    }


async def expect_error(communicator, code: str) -> dict:
    frame = await communicator.receive_json_from(timeout=5)
    assert frame["type"] == "error", frame
    assert frame["data"]["error_struct"]["error_code"] == code, frame
    assert frame["data"]["error_struct"]["message"]
    return frame


async def still_works(communicator) -> None:
    await communicator.send_json_to({"type": "resume"})
    await expect_error(communicator, "missing_fields")


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("{this is not json", "malformed_json"),
        ('["a", "list"]', "malformed_message"),
        ('{"no_type": 1}', "malformed_message"),
        ('{"type": "launch_missiles"}', "unknown_message"),
        ('{"type": "user_message"}', "missing_fields"),
        ('{"type": "cancel"}', "missing_fields"),
        ('{"type": "resume", "task_id": 1, "after_seq": -4}', "invalid_field"),
    ],
)
async def test_bad_frames_get_an_error_frame_and_the_socket_stays_open(people, frame, code):
    communicator = await open_socket(people["alice"])
    await communicator.send_to(text_data=frame)
    await expect_error(communicator, code)
    await still_works(communicator)
    await communicator.disconnect()


async def test_oversized_frame_is_refused_and_nothing_is_created(people):
    from apps.tasks.models import Task

    communicator = await open_socket(people["alice"])
    big = json.dumps({"type": "user_message", "workspace": "alpha", "text": "x" * (64 * 1024 + 10)})
    await communicator.send_to(text_data=big)
    await expect_error(communicator, "frame_too_large")
    await still_works(communicator)
    assert await sync_to_async(Task.objects.count)() == 0
    await communicator.disconnect()


async def test_another_users_task_cannot_be_resumed_or_cancelled_and_is_not_revealed(people):
    from apps.tasks.models import Task

    foreign = await sync_to_async(make_task)(people["bob"], people["beta"])
    await sync_to_async(add_events)(foreign, "task_started", "token")
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to({"type": "resume", "task_id": foreign.pk, "after_seq": 0})
    resumed = await expect_error(communicator, "not_found")
    await communicator.send_json_to({"type": "cancel", "task_id": foreign.pk})
    cancelled = await expect_error(communicator, "not_found")
    await communicator.send_json_to({"type": "resume", "task_id": 999999, "after_seq": 0})
    missing = await expect_error(communicator, "not_found")
    # the same answer as for a task that does not exist: existence is not revealed
    assert resumed["data"] == missing["data"]
    assert (
        cancelled["data"]["error_struct"]["message"] == missing["data"]["error_struct"]["message"]
    )
    assert await communicator.receive_nothing(timeout=0.2)
    refreshed = await sync_to_async(Task.objects.get)(pk=foreign.pk)
    assert refreshed.cancel_requested_at is None
    await communicator.disconnect()


async def test_user_message_to_a_foreign_workspace_is_not_found(people):
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to({"type": "user_message", "workspace": "beta", "text": "hi"})
    await expect_error(communicator, "not_found")
    await communicator.disconnect()


async def test_resume_replays_stored_events_then_live_ones_exactly_once_in_order(people):
    task = await sync_to_async(make_task)(people["alice"], people["alpha"])
    stored = await sync_to_async(add_events)(task, "task_started", "token", "token")
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to({"type": "resume", "task_id": task.pk, "after_seq": 1})
    replayed = [await communicator.receive_json_from(timeout=5) for _ in range(2)]
    assert [e["seq"] for e in replayed] == [2, 3]

    # a live event that duplicates a replayed one, then new ones: only the new ones arrive
    layer = get_channel_layer()
    more = await sync_to_async(add_events)(task, "token", "task_finished")
    for event in [stored[2], *more]:
        await layer.group_send(
            task_group(task.pk), {"type": "task.event", "event": event.as_message()}
        )
    live = [await communicator.receive_json_from(timeout=5) for _ in range(2)]
    assert [e["seq"] for e in live] == [4, 5]
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_a_gap_in_live_events_is_filled_from_the_database(people):
    task = await sync_to_async(make_task)(people["alice"], people["alpha"])
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to({"type": "resume", "task_id": task.pk, "after_seq": 0})
    events = await sync_to_async(add_events)(task, "task_started", "token", "token")
    # seq 1 and 2 were "lost" by the channel layer; seq 3 arrives live
    await get_channel_layer().group_send(
        task_group(task.pk), {"type": "task.event", "event": events[2].as_message()}
    )
    got = [await communicator.receive_json_from(timeout=5) for _ in range(3)]
    assert [e["seq"] for e in got] == [1, 2, 3]
    await communicator.disconnect()


async def test_events_the_channel_layer_never_delivered_still_arrive_from_the_database(people):
    """channels-redis drops group messages silently when an inbox is full; if the tail of a task
    (task_finished included) is lost, the socket must still get it."""
    from apps.tasks.doors.consumers import CATCH_UP_SECONDS

    task = await sync_to_async(make_task)(people["alice"], people["alpha"])
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to({"type": "resume", "task_id": task.pk, "after_seq": 0})
    assert await communicator.receive_nothing(timeout=0.2)
    await sync_to_async(add_events)(task, "task_started", "token", "task_finished")  # no broadcast
    got = [await communicator.receive_json_from(timeout=CATCH_UP_SECONDS * 3) for _ in range(3)]
    assert [(e["seq"], e["type"]) for e in got] == [
        (1, "task_started"),
        (2, "token"),
        (3, "task_finished"),
    ]
    await communicator.disconnect()


async def test_frame_limit_is_a_setting(people, settings):
    settings.AGENTKIT_WS_MAX_FRAME_BYTES = 2048
    communicator = await open_socket(people["alice"])
    await communicator.send_to(
        text_data=json.dumps({"type": "resume", "task_id": 1, "pad": "x" * 3000})
    )
    frame = await expect_error(communicator, "frame_too_large")
    assert "2 KB" in frame["data"]["error_struct"]["message"]
    await communicator.disconnect()


def _scripted(config_file, tmp_path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("- match: '(?i)hello'\n  repeat: true\n  text: Hi there.\n")
    config_file(f"models: {{main: {{provider: scripted, script: {script}}}}}\n")


async def until_finished(communicator) -> list[dict]:
    frames = []
    while not frames or frames[-1]["type"] != "task_finished":
        frames.append(await communicator.receive_json_from(timeout=10))
    return frames


async def test_a_resent_message_gets_its_task_from_the_start_even_when_it_is_over(
    people, config_file, tmp_path
):
    """A browser whose socket died right after it sent a message never learnt the task's id: it
    sends the same message again (same client_msg_id) and must get that task, not a second one
    and not silence."""
    _scripted(config_file, tmp_path)
    message = {"type": "user_message", "text": "@chat hello", "client_msg_id": "m-1"}
    first = await open_socket(people["alice"])
    await first.send_json_to(message)
    original = await until_finished(first)
    await first.disconnect()

    again = await open_socket(people["alice"])
    await again.send_json_to(message)
    resent = await until_finished(again)
    assert resent == original  # every event, from seq 1, once
    assert await again.receive_nothing(timeout=0.2)
    await again.send_json_to({**message, "after_seq": 2})  # a sender that saw seq 1 and 2
    assert await again.receive_nothing(timeout=0.3)  # this socket follows it already
    await again.disconnect()

    third = await open_socket(people["alice"])
    await third.send_json_to({**message, "after_seq": 2})
    assert await until_finished(third) == original[2:]
    await third.send_json_to({**message, "after_seq": "2"})
    await expect_error(third, "invalid_field")
    await third.disconnect()
    count = await sync_to_async(Task.objects.filter(client_msg_id="m-1").count)()
    assert count == 1


async def test_a_message_sent_while_the_socket_is_busy_gets_every_event_of_its_run(
    people, config_file, tmp_path, monkeypatch
):
    """The socket is busy delivering (its delivery lock held) while its new task runs inline
    and ends: it learns the task only afterwards, and must still send all of it, at once (not
    after the catch-up loop's seconds: that safety net is set out of reach here)."""
    monkeypatch.setattr(consumers, "CATCH_UP_SECONDS", 600.0)
    _scripted(config_file, tmp_path)
    earlier = await sync_to_async(make_task)(people["alice"], people["alpha"])
    await sync_to_async(add_events)(earlier, "task_started", "task_finished")
    communicator = await open_socket(people["alice"])
    await communicator.send_json_to({"type": "resume", "task_id": earlier.pk, "after_seq": 2})
    assert await communicator.receive_nothing(timeout=0.2)
    [socket] = followers(earlier.pk)

    async with socket.delivery:
        await communicator.send_json_to(
            {"type": "user_message", "text": "@chat hello", "client_msg_id": "busy"}
        )
        for _ in range(200):
            ended = await sync_to_async(
                Task.objects.filter(client_msg_id="busy", status="completed").exists
            )()
            if ended:
                break
            await asyncio.sleep(0.05)
        assert ended
    frames = await until_finished(communicator)
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert frames[0]["type"] == "task_started" and len(frames) >= 3
    await communicator.disconnect()
