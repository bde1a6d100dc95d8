"""The WebSocket endpoint goes through the real ASGI application (origin check + session auth)."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from agentkit_site.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def session_cookie_header(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    return (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode())


@pytest.fixture
def user():
    return get_user_model().objects.create_user("alice", password="pw-alice-123")


async def connect(headers):
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


async def test_logged_in_user_with_own_origin_is_accepted(user):
    cookie = await _cookie(user)
    communicator, connected, _ = await connect([(b"origin", b"http://127.0.0.1:8000"), cookie])
    assert connected
    await communicator.send_json_to({"type": "nonsense"})
    reply = await communicator.receive_json_from()
    assert reply["type"] == "error"
    await communicator.disconnect()


async def test_foreign_origin_is_refused_even_when_logged_in(user):
    cookie = await _cookie(user)
    communicator, connected, _ = await connect([(b"origin", b"http://evil.example"), cookie])
    assert not connected
    await communicator.disconnect()


async def test_anonymous_user_is_refused():
    communicator, connected, code = await connect([(b"origin", b"http://127.0.0.1:8000")])
    assert not connected
    assert code == 4401
    await communicator.disconnect()


async def _cookie(user):
    from asgiref.sync import sync_to_async

    return await sync_to_async(session_cookie_header)(user)


async def test_a_session_from_before_a_password_change_is_refused(user):
    """The session's auth hash must match the user's, as for pages (agentkit_site/ws_auth.py)."""
    from asgiref.sync import sync_to_async

    cookie = await _cookie(user)

    def change_password():
        user.set_password("a-new-password-456")
        user.save()

    await sync_to_async(change_password)()
    communicator, connected, code = await connect([(b"origin", b"http://127.0.0.1:8000"), cookie])
    assert not connected
    assert code == 4401
    await communicator.disconnect()


async def test_a_socket_opens_and_starts_a_task_while_the_thread_sensitive_thread_is_busy(
    user, tmp_path
):
    """The handshake's session and user lookup, the consumer's dispatch of each frame and the
    task's creation and start never wait for Django's one thread-sensitive thread (50 sockets
    opened at once queued there: bench/chat_load.py). Here that thread is held until the task's
    first event has arrived; were any of them to need it, nothing would arrive."""
    import asyncio
    import threading

    from asgiref.sync import sync_to_async

    from tests.tasks.factories import make_workspace

    (tmp_path / "alpha").mkdir()
    await sync_to_async(make_workspace)("alpha", tmp_path / "alpha", user)
    cookie = await _cookie(user)
    release = threading.Event()
    held = asyncio.ensure_future(sync_to_async(release.wait, thread_sensitive=True)())
    try:
        communicator, connected, _ = await connect([(b"origin", b"http://127.0.0.1:8000"), cookie])
        assert connected
        await communicator.send_json_to({"type": "user_message", "text": "@chat hi"})
        first = await communicator.receive_json_from(timeout=10)
        assert first["type"] == "task_started", first
        assert not held.done()  # the thread was busy all along
    finally:
        release.set()
        await held
    while (await communicator.receive_json_from(timeout=10))["type"] != "task_finished":
        pass
    await communicator.disconnect()


async def test_a_socket_closes_while_the_thread_sensitive_thread_is_busy(user):
    """channels' websocket_disconnect ends with `aclose_old_connections()`, a trip to Django's
    one thread-sensitive thread (and a new SQLite connection there at its next use) per closed
    socket: 50 tasks ending together queued 50 trips there while their sockets closed. The
    consumer's database work runs on the default executor; its close needs nothing there."""
    import asyncio
    import threading

    from asgiref.sync import sync_to_async

    cookie = await _cookie(user)
    communicator, connected, _ = await connect([(b"origin", b"http://127.0.0.1:8000"), cookie])
    assert connected
    release = threading.Event()
    held = asyncio.ensure_future(sync_to_async(release.wait, thread_sensitive=True)())
    try:
        await communicator.send_input({"type": "websocket.disconnect", "code": 1000})
        await asyncio.wait_for(asyncio.shield(communicator.future), timeout=5)
        assert not held.done()  # closed with the thread busy all along
    finally:
        release.set()
        await held
