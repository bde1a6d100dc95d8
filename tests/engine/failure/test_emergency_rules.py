"""Seed 001 U2: the Emergency tier's rules (apps/engine/failure/fallback.py) and the TaskResult extension."""

from __future__ import annotations

import asyncio
import json

import pytest

from apps.engine.config import ConfigError, parse_config
from apps.engine.failure import structs
from apps.engine.failure.fallback import EmergencyError, EmergencyRules, scrub
from apps.engine.llm import errors as llm
from apps.engine.loop.flow import (
    Cancelled,
    Failed,
    LoopStopped,
    OutOfSteps,
    SandboxMissing,
    TimedOut,
    VerificationFailed,
)
from apps.engine.sandbox import SandboxUnavailable
from apps.engine.task import TaskResult


@pytest.mark.parametrize(
    ("exc", "code", "retryable"),
    [
        (TimedOut(error=structs.wall_time_exceeded(5)), "timeout", True),
        (Failed(cause=llm.LLMTimeoutError("read timed out")), "timeout", True),
        (LoopStopped(error=structs.interrupted()), "loop_detected", True),
        (OutOfSteps(error=structs.max_steps_exceeded(3)), "max_steps_exceeded", False),
        (llm.RateLimitError(429, retry_after=2.0), "llm_failure", True),
        (llm.AuthenticationError(401), "llm_failure", False),
        (llm.LLMStatusError(400, {"error": {"message": "bad"}}), "llm_failure", False),
        (llm.ContextWindowError(400), "llm_failure", False),
        (llm.LLMStatusError(500), "llm_failure", True),
        (llm.LLMConnectionError("stream cut"), "llm_failure", True),
        (
            VerificationFailed(error=structs.verification_failed(2, ["x"])),
            "verification_failed",
            False,
        ),
        (SandboxMissing(error=structs.interrupted()), "sandbox_unavailable", False),
        (SandboxUnavailable("no bwrap"), "sandbox_unavailable", False),
        (RuntimeError("boom"), "internal_error", False),
        (Failed(cause=KeyError("x")), "internal_error", False),
    ],
)
def test_each_failure_type_maps_to_its_error_code(exc, code, retryable):
    error = EmergencyRules.classify(exc)
    assert (error.error_code, error.retryable) == (code, retryable)
    assert error.message and error.suggestions


def test_llm_failures_are_told_apart_by_message():
    messages = {
        EmergencyRules.classify(exc).message
        for exc in (
            llm.RateLimitError(429),
            llm.AuthenticationError(401),
            llm.LLMStatusError(400),
            llm.LLMStatusError(503),
        )
    }
    assert len(messages) == 4


@pytest.mark.parametrize(
    "exc", [Cancelled(error=structs.cancelled("stop")), asyncio.CancelledError()]
)
def test_cancellation_is_never_classified(exc):
    with pytest.raises(TypeError, match="propagates"):
        EmergencyRules.classify(exc)


def test_to_dict_has_all_five_fields_and_the_struct_only_the_wire_four():
    error = EmergencyRules.classify(RuntimeError("boom at /secret/path"))
    assert set(error.to_dict()) == {
        "error_code",
        "message",
        "suggestions",
        "retryable",
        "original_error",
    }
    assert error.to_dict()["original_error"] == "RuntimeError: boom at /secret/path"
    assert set(error.to_struct().model_dump()) == {
        "error_code",
        "message",
        "suggestions",
        "retryable",
    }


def test_to_error_message_numbers_the_suggestions():
    error = EmergencyError("timeout", "Out of time.", ["Retry.", "Split it."], True)
    assert error.to_error_message() == "Out of time.\nSuggestions: 1) Retry. 2) Split it."
    assert EmergencyError("x", "Only this.").to_error_message() == "Only this."


def test_rules_are_overridable_in_agentkit_yaml():
    cfg = parse_config(
        {
            "fallback_chain": {
                "emergency": {
                    "rules": {
                        "timeout": {"suggestions": ["Ask the admin."], "retryable": False},
                        "internal_error": {"message": "Something broke."},
                    }
                }
            }
        }
    )
    timeout = EmergencyRules.classify(TimedOut(), cfg.fallback_chain)
    assert timeout.suggestions == ["Ask the admin."] and timeout.retryable is False
    assert timeout.message == EmergencyRules.classify(TimedOut()).message  # not overridden
    assert EmergencyRules.classify(ValueError(), cfg.fallback_chain).message == "Something broke."


def test_an_unknown_rule_name_in_config_is_refused_with_its_path():
    with pytest.raises(ConfigError, match=r"fallback_chain\.emergency\.rules"):
        parse_config({"fallback_chain": {"emergency": {"rules": {"timeuot": {}}}}})


def test_task_result_without_error_serialises_exactly_as_before():
    result = TaskResult(task_id=1, status="completed", final="done", steps=2)
    assert json.dumps(result.event_data(), sort_keys=True) == json.dumps(
        {
            "status": "completed",
            "final": "done",
            "steps": 2,
            "usage": {
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
                "llm_calls": 0,
            },
            "cost": 0.0,
            "error": None,
            "verification": [],
        },
        sort_keys=True,
    )


def test_task_result_with_an_emergency_carries_salvage_but_never_the_original_error():
    error = EmergencyRules.classify(llm.LLMStatusError(500))
    result = TaskResult(
        task_id=1,
        status="failed",
        error=error.to_struct(),
        salvage={"source": "editor", "files": ["a.py"], "diff": "+x"},
        original_error=error.original_error,
    )
    data = result.event_data()
    assert data["error"] == error.to_struct().model_dump()
    assert data["salvage"]["files"] == ["a.py"]
    assert "original_error" not in data


def test_scrub_removes_paths_and_secrets_longest_first():
    text = "open /work/main/.venv/lib/x.py failed with key sk-abcdef123 for /home/alice/ws"
    clean = scrub(text, paths=["/work/main", "/work/main/.venv"], secrets=["sk-abcdef123"])
    assert "/work" not in clean and "sk-abcdef123" not in clean and "alice" not in clean
    assert "<path>/lib/x.py" in clean
