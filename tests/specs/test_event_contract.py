"""The review events are part of the one event vocabulary (no silent no-op for an unknown type)
and the chat page loads their renderer."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.engine.events import EVENT_TYPES
from apps.engine.plan.spec import parse_spec_review_id, spec_review_id
from tests.tasks.factories import make_user

pytestmark = pytest.mark.django_db


def test_review_events_are_known_types_with_stable_review_ids():
    assert {"spec_review_request", "spec_review_resolved", "task_resumed"} <= set(EVENT_TYPES)
    assert spec_review_id(42) == "42:spec_review" and parse_spec_review_id("42:spec_review") == 42
    assert parse_spec_review_id("42:review") is None


def test_the_chat_page_loads_the_spec_review_renderer():
    client = Client()
    client.force_login(make_user("alice"))
    page = client.get("/").content.decode()
    assert "/static/specs.js" in page
