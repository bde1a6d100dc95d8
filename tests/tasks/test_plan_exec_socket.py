"""@plan over the chat WebSocket (seed 002 U4): the message routes to plan_exec, the engine runs
with its phase policy, and phase events reach the socket in order with the rest."""

from __future__ import annotations

import pytest

from tests.config_text import without_spec_review
from tests.support import ROOT
from tests.tasks.test_consumer import open_socket

pytestmark = pytest.mark.django_db(transaction=True)


async def test_plan_message_over_the_socket_streams_phase_events_to_the_client(demo, config_file):
    user, workspace, root = demo
    config_file(without_spec_review((ROOT / "agentkit.yaml").read_text()))  # tests/specs: gate
    communicator = await open_socket(user)
    await communicator.send_json_to(
        {
            "type": "user_message",
            "workspace": workspace.pk,
            "text": "@plan fix the failing test in tests/test_slug.py",
            "client_msg_id": "plan-1",
        }
    )
    frames = []
    while not frames or frames[-1]["type"] != "task_finished":
        frames.append(await communicator.receive_json_from(timeout=60))
    await communicator.disconnect()

    assert frames[0]["type"] == "task_started" and frames[0]["data"]["mode"] == "plan_exec"
    assert "advance_phase" in frames[0]["data"]["tools"]  # offered; the engine answers it
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    phases = [
        (f["data"]["previous"], f["data"]["phase"]) for f in frames if f["type"] == "phase_changed"
    ]
    assert phases[:2] == [("planning", "building"), ("building", "verification")]
    kinds = [f["type"] for f in frames]
    assert "reflection" in kinds and frames[-1]["data"]["status"] == "completed"
    assert 'r"[^a-zA-Z0-9]+"' in (root / "textkit" / "slug.py").read_text()
