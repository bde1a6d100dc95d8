"""Session authentication for WebSockets: channels' cookie + session + auth middleware stack, with
the user looked up on the shared thread pool.

channels' AuthMiddleware looks the user up with `database_sync_to_async`: on Django's ONE
thread-sensitive thread, closing that thread's database connection before and after (a new
SQLite connection per handshake). With 50 sockets opened at once every handshake queued there
behind the others, and behind every other piece of thread-sensitive work of the server
(bench/chat_load.py). The lookup itself is two queries (the session, the user) that any thread
can run: here they run on the loop's default executor, whose threads keep their connection, as
the rest of the socket's database work does (apps/tasks/doors/consumers.py).

The check is channels' (and Django's): the user the session names, through the backend the
session names, and only while the session's auth hash matches the user's (a password change
logs sockets out as it logs pages out); otherwise the session is flushed and the user is
anonymous (the consumer closes with 4401).
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from channels.middleware import BaseMiddleware
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.contrib.auth.models import AnonymousUser
from django.utils.crypto import constant_time_compare


def session_user(session):
    """The user `session` is logged in as, else AnonymousUser (blocking: a worker thread)."""
    from django.contrib.auth import get_user_model

    user = None
    try:
        user_id = get_user_model()._meta.pk.to_python(session[SESSION_KEY])
        backend_path = session[BACKEND_SESSION_KEY]
    except KeyError:
        pass
    else:
        if backend_path in settings.AUTHENTICATION_BACKENDS:
            user = load_backend(backend_path).get_user(user_id)
            if hasattr(user, "get_session_auth_hash"):
                session_hash = session.get(HASH_SESSION_KEY)
                if not (
                    session_hash
                    and constant_time_compare(session_hash, user.get_session_auth_hash())
                ):
                    session.flush()
                    user = None
    return user or AnonymousUser()


class PooledAuthMiddleware(BaseMiddleware):
    """channels' AuthMiddleware's job, the lookup on the default executor (see the module
    docstring): `scope["user"]` is the session's user (or AnonymousUser) before the consumer
    runs. A scope that already has a user (a test's communicator) keeps it."""

    async def __call__(self, scope, receive, send):
        if "session" not in scope:
            raise ValueError(
                "PooledAuthMiddleware needs scope['session']: wrap it in channels' "
                "SessionMiddleware (SessionAuthStack does)"
            )
        if "user" not in scope:
            user = await sync_to_async(session_user, thread_sensitive=False)(scope["session"])
            scope = dict(scope, user=user)
        return await super().__call__(scope, receive, send)


def SessionAuthStack(inner):  # named like channels' AuthMiddlewareStack
    return CookieMiddleware(SessionMiddleware(PooledAuthMiddleware(inner)))
