"""Verification at the final answer (seed 003 G1, R1-R3): a failure goes back to the model as a
user message (max_reinjections, bounded by max_steps); still failing → failed with the log."""

from __future__ import annotations

from apps.engine.ports import VerificationOutcome
from apps.engine.task import AgentTask
from tests.engine.helpers import (
    EchoTool,
    HookRecorder,
    collect,
    config,
    of_type,
    scripted_engine,
)

TASK = AgentTask(task_id=1, goal="fix the bug")
VERIFY_REACT = {"modes": {"react": True}}


class ScriptedVerifier:
    """Returns the given outcomes in order and records the answers it was asked about."""

    def __init__(self, *outcomes: VerificationOutcome):
        self.outcomes = list(outcomes)
        self.answers: list[str] = []

    async def __call__(self, answer: str) -> VerificationOutcome:
        self.answers.append(answer)
        return self.outcomes.pop(0)


FAIL = VerificationOutcome(
    passed=False,
    errors=("tests/test_slug.py::test_unicode FAILED", "ruff: F401 unused import"),
    log="=== 1 failed, 4 passed ===",
)
PASS = VerificationOutcome(passed=True, log="=== 5 passed ===")


async def test_failed_verification_is_reinjected_and_the_corrected_answer_passes():
    verifier = ScriptedVerifier(FAIL, PASS)
    hooks = HookRecorder()
    turns = ["Fixed it.", {"text": "Fixed it properly now.", "match": "test_unicode FAILED"}]
    engine, model = scripted_engine(
        turns, cfg=config(verification=VERIFY_REACT), verifier=verifier, hooks=hooks
    )
    events = await collect(engine, TASK)

    feedback = model.requests[1].messages[-1]
    assert feedback.role == "user"
    assert "- tests/test_slug.py::test_unicode FAILED" in feedback.content
    assert "- ruff: F401 unused import" in feedback.content
    assert verifier.answers == ["Fixed it.", "Fixed it properly now."]
    results = [e.data for e in of_type(events, "verification_result")]
    assert [(r["attempt"], r["passed"], r["reinjected"]) for r in results] == [
        (1, False, True),
        (2, True, False),
    ]
    finished = events[-1].data
    assert finished["status"] == "completed" and finished["final"] == "Fixed it properly now."
    assert [v["passed"] for v in finished["verification"]] == [False, True]
    assert of_type(events, "final_answer")[0].data["text"] == "Fixed it properly now."
    assert hooks.names == ["on_task_complete"]


async def test_still_failing_after_the_reinjection_stops_with_the_verification_log():
    verifier = ScriptedVerifier(FAIL, FAIL)
    engine, model = scripted_engine(
        ["Fixed it.", "Really fixed."], cfg=config(verification=VERIFY_REACT), verifier=verifier
    )
    events = await collect(engine, TASK)
    finished = events[-1].data
    assert finished["status"] == "failed" and finished["final"] == "Really fixed."
    assert finished["error"]["error_code"] == "verification_failed"
    assert "test_unicode FAILED" in finished["error"]["message"]
    assert [v["log"] for v in finished["verification"]] == [FAIL.log, FAIL.log]
    assert len(model.requests) == 2
    assert not of_type(events, "final_answer")


async def test_zero_reinjections_fails_at_the_first_failed_verification():
    verifier = ScriptedVerifier(FAIL)
    engine, model = scripted_engine(
        ["Fixed it."],
        cfg=config(verification={**VERIFY_REACT, "max_reinjections": 0}),
        verifier=verifier,
    )
    result = await engine.execute(TASK)
    assert result.status == "failed" and len(model.requests) == 1
    assert [record.passed for record in result.verification] == [False]


async def test_reinjections_are_bounded_by_max_steps():
    verifier = ScriptedVerifier(FAIL, FAIL, FAIL)
    engine, model = scripted_engine(
        [{"text": "Fixed it.", "repeat": True}],
        cfg=config(verification={**VERIFY_REACT, "max_reinjections": 5}, react={"max_steps": 2}),
        verifier=verifier,
    )
    result = await engine.execute(TASK)
    assert result.error.error_code == "max_steps_exceeded"
    assert len(model.requests) == 2 and len(result.verification) == 2


def test_default_max_reinjections_is_one():
    assert config().verification.max_reinjections == 1


async def test_verifier_is_not_called_when_verification_is_off_for_the_mode():
    verifier = ScriptedVerifier()
    engine, _ = scripted_engine(["Done."], verifier=verifier)  # react: off by default
    result = await engine.execute(TASK)
    assert result.status == "completed" and verifier.answers == []


async def test_direct_chat_is_never_verified():
    verifier = ScriptedVerifier()
    engine, _ = scripted_engine(
        ["Hi!"], cfg=config(verification={"modes": {"direct_chat": True}}), verifier=verifier
    )
    result = await engine.execute(AgentTask(task_id=1, goal="hi", mode="direct_chat"))
    assert result.status == "completed" and verifier.answers == []


async def test_long_verification_log_is_truncated_in_the_result():
    huge = VerificationOutcome(passed=False, errors=("boom",), log="L" * 50_000)
    engine, _ = scripted_engine(
        ["Done."],
        cfg=config(
            verification={**VERIFY_REACT, "max_reinjections": 0},
            react={"tool_output_max_chars": 2000},
        ),
        verifier=ScriptedVerifier(huge),
    )
    result = await engine.execute(TASK)
    assert len(result.verification[0].log) < 2500


async def test_loop_detector_starts_afresh_after_a_reinjection():
    # Two identical reads before the first answer, two more after the re-injected failure: four
    # in a row would be a loop (threshold 3), but the failure is new information, so the window
    # starts again after it and the run completes without any loop warning.
    read = {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]}
    turns = [read, read, {"text": "Fixed it."}, read, read, {"text": "Fixed it properly now."}]
    verifier = ScriptedVerifier(FAIL, PASS)
    engine, model = scripted_engine(
        turns, tools=[EchoTool()], cfg=config(verification=VERIFY_REACT), verifier=verifier
    )
    events = await collect(engine, TASK)

    assert not of_type(events, "error"), [e.data for e in of_type(events, "error")]
    assert verifier.answers == ["Fixed it.", "Fixed it properly now."]
    assert len(model.requests) == 6
    finished = events[-1].data
    assert finished["status"] == "completed" and finished["final"] == "Fixed it properly now."
