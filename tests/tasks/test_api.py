"""The JSON API of ARCHITECTURE.md section 6: auth (session + CSRF, bearer), scoping, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.test import Client

from apps.tasks.models import ApiToken, Task
from apps.tasks.services import api_token_create, api_token_revoke
from tests.support import ROOT, manage, migrate_sqlite, server_env
from tests.tasks.factories import add_events, make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(tmp_path):
    user = make_user("alice")
    workspace = make_workspace("alpha", tmp_path, user)
    return user, workspace


@pytest.fixture
def bob(tmp_path):
    user = make_user("bob")
    workspace = make_workspace("beta", tmp_path, user)
    return user, workspace


def bearer(user) -> dict:
    _, key = api_token_create(user=user)
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def test_anonymous_request_gets_json_401():
    response = Client().get("/api/workspaces")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_workspaces_lists_only_the_users_own(alice, bob):
    response = Client().get("/api/workspaces", **bearer(alice[0]))
    assert response.json() == {"workspaces": [{"id": alice[1].pk, "name": "alpha"}]}


def test_tokens_are_stored_hashed_and_revocable(alice):
    token, key = api_token_create(user=alice[0])
    assert key not in {token.key_hash, token.prefix} and len(token.key_hash) == 64
    assert not ApiToken.objects.filter(key_hash=key).exists()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    assert Client().get("/api/workspaces", **headers).status_code == 200
    api_token_revoke(token=token)
    response = Client().get("/api/workspaces", **headers)
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_token"


def test_session_post_without_csrf_is_refused(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice[0])
    response = client.post(
        "/api/tasks",
        json.dumps({"workspace": "alpha", "text": "hi"}),
        content_type="application/json",
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "csrf_failed"
    assert Task.objects.count() == 0


def test_other_users_task_is_not_found_not_forbidden(alice, bob):
    task = make_task(bob[0], bob[1])
    add_events(task, "task_started")
    client = Client()
    for url in (f"/api/tasks/{task.pk}", f"/api/tasks/{task.pk}/events"):
        response = client.get(url, **bearer(alice[0]))
        assert (
            response.status_code == 404 and response.json()["error"]["message"] == "task not found"
        )
    response = client.post(f"/api/tasks/{task.pk}/cancel", **bearer(alice[0]))
    assert response.status_code == 404
    task.refresh_from_db()
    assert task.cancel_requested_at is None


def test_events_after_seq_in_websocket_shape(alice):
    task = make_task(*alice)
    add_events(task, "task_started", "token", "token", "task_finished")
    response = Client().get(f"/api/tasks/{task.pk}/events?after=2", **bearer(alice[0]))
    events = response.json()["events"]
    assert [e["seq"] for e in events] == [3, 4]
    assert set(events[0]) == {"type", "task_id", "seq", "ts", "data"}
    assert events[0]["task_id"] == task.pk
    bad = Client().get(f"/api/tasks/{task.pk}/events?after=-1", **bearer(alice[0]))
    assert bad.status_code == 400 and "non-negative" in bad.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"[1, 2]", 400, "invalid_json"),
        (b'{"workspace": "alpha"}', 400, "missing_field"),
        (b'{"text": "hi"}', 400, "missing_field"),
        (b'{"workspace": "beta", "text": "hi"}', 404, "not_found"),
        (b'{"workspace": "alpha", "text": "hi", "mode": "yolo"}', 400, "unknown_mode"),
        (b'{"workspace": "alpha", "text": "@skill:nope hi"}', 400, "unknown_skill"),
    ],
)
def test_bad_task_requests_get_clear_errors_and_create_nothing(alice, bob, body, status, code):
    response = Client().post(
        "/api/tasks", body, content_type="application/json", **bearer(alice[0])
    )
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]
    assert Task.objects.count() == 0


def test_cancel_of_a_finished_task_reports_nothing_to_cancel(alice):
    task = make_task(*alice, status="completed")
    response = Client().post(f"/api/tasks/{task.pk}/cancel", **bearer(alice[0]))
    assert response.status_code == 200
    assert response.json() == {"id": task.pk, "status": "completed", "cancel_requested": False}


def test_create_api_token_prints_the_token_alone_on_the_last_line(tmp_path):
    env = server_env(tmp_path)
    migrate_sqlite(env)
    booted = manage(env, "bootstrap")
    assert booted.returncode == 0, booted.stdout + booted.stderr
    proc = subprocess.run(
        [sys.executable, "manage.py", "create_api_token", "admin"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("ak_") and " " not in last
    missing = subprocess.run(
        [sys.executable, "manage.py", "create_api_token", "nobody"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert missing.returncode != 0 and "no user named 'nobody'" in missing.stderr


def test_admin_revoke_action_disables_a_token(alice):
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("boss", password="pw-boss-123")
    token, key = api_token_create(user=alice[0])
    client = Client()
    client.force_login(admin)
    page = client.get("/admin/tasks/apitoken/")
    assert page.status_code == 200 and token.prefix in page.content.decode()
    assert key not in page.content.decode()  # the plain key is never shown again
    response = client.post(
        "/admin/tasks/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}, follow=True
    )
    assert "Revoked 1 token(s)." in response.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert Client().get("/api/workspaces", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 401
