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
