"""The event vocabulary matches ARCHITECTURE.md section 4."""

from __future__ import annotations

import datetime as dt

import pytest

from apps.engine.events import EVENT_TYPES, ErrorStruct, Event

SECTION_4_TYPES = [
    "task_started",
    "token",
    "reasoning",  # issue 28: the model's reasoning text (thinking, reasoning_content), like token
    "tool_call",
    "tool_result",
    "phase_changed",
    "phase_violation",
    "budget_exhausted",
    "verification_result",
    "reflection",
    "task_resumed",  # issue 15: a plan_exec run resumed after a process restart
    "spec_review_request",
    "spec_review_resolved",
    "phase_started",
    "phase_completed",
    "phase_failed",
    "phase_rollback_started",
    "phase_rollback_completed",
    "phase_rollback_failed",
    "compression",
    "recovery_started",  # issue 14: the failure chain's Recovery tier
    "recovery_finished",
    "final_answer",
    "error",
    "task_finished",
]


def test_every_type_of_the_protocol_is_known():
    assert sorted(EVENT_TYPES) == sorted(SECTION_4_TYPES)


def test_event_serialises_to_the_websocket_shape():
    ts = dt.datetime(2026, 6, 29, 12, 0, tzinfo=dt.UTC)
    event = Event(type="token", task_id=7, seq=1, ts=ts, data={"text": "hi", "step": 1})
    assert event.as_json() == {
        "type": "token",
        "task_id": 7,
        "seq": 1,
        "ts": "2026-06-29T12:00:00Z",
        "data": {"text": "hi", "step": 1},
    }


def test_unknown_type_and_seq_zero_are_refused():
    ts = dt.datetime.now(dt.UTC)
    with pytest.raises(ValueError, match="unknown event type 'tokens'"):
        Event(type="tokens", task_id=1, seq=1, ts=ts)
    with pytest.raises(ValueError, match="seq counts from 1"):
        Event(type="token", task_id=1, seq=0, ts=ts)


def test_error_struct_has_the_four_protocol_fields():
    struct = ErrorStruct(error_code="loop_detected", message="stuck")
    assert struct.model_dump() == {
        "error_code": "loop_detected",
        "message": "stuck",
        "suggestions": [],
        "retryable": False,
    }
