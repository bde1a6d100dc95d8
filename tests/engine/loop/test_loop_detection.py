"""LoopDetector: the four loop patterns, polling is not a loop, warn once then stop, reset."""

from __future__ import annotations

from apps.engine.config import LoopDetectionConfig
from apps.engine.loop.detection import LoopDetector

LS = 'shell {"command": "ls"}'
CAT = 'read_file {"path": "a.py"}'
STATUS = 'shell {"command": "tail -n 3 build.log"}'


def record_all(detector, steps):
    return [detector.record(*step[:2], error=step[2] if len(step) > 2 else False) for step in steps]


def test_same_action_and_observation_three_times_is_a_repeat():
    detector = LoopDetector()
    verdicts = record_all(detector, [(LS, "a b c")] * 3)
    assert verdicts[:2] == [None, None]
    assert verdicts[2].pattern == "repeat" and not verdicts[2].fatal
    assert "3 times" in verdicts[2].message and "ls" in verdicts[2].message


def test_repeat_threshold_comes_from_config():
    detector = LoopDetector(LoopDetectionConfig(repeat_threshold=5))
    verdicts = record_all(detector, [(LS, "same")] * 5)
    assert verdicts[3] is None and verdicts[4].pattern == "repeat"


def test_same_action_failing_three_times_with_different_errors_is_error_repeat():
    detector = LoopDetector()
    steps = [(CAT, f"ERROR [tool_execution_error]: attempt {i}", True) for i in range(3)]
    verdicts = record_all(detector, steps)
    assert verdicts[2].pattern == "error_repeat"


def test_same_action_failing_with_other_actions_between_is_not_a_loop():
    detector = LoopDetector()
    steps = []
    for i in range(4):
        steps.append(("run_tests {}", f"ERROR: {i} failed", True))
        steps.append((f'str_replace_editor {{"new": "{i}"}}', "edited", False))
    assert record_all(detector, steps) == [None] * 8


def test_alternating_between_two_actions_over_six_steps_is_alternation():
    detector = LoopDetector()
    verdicts = record_all(detector, [(LS, "a"), (CAT, "b")] * 3)
    assert verdicts[:5] == [None] * 5
    assert verdicts[5].pattern == "alternation"


def test_three_distinct_actions_in_rotation_are_not_alternation():
    detector = LoopDetector()
    assert record_all(detector, [(LS, "a"), (CAT, "b"), (STATUS, "c")] * 2) == [None] * 6


def test_replies_without_action_in_a_row_are_a_monologue():
    detector = LoopDetector()
    verdicts = [detector.record(None) for _ in range(4)]
    assert verdicts[:3] == [None] * 3
    assert verdicts[3].pattern == "monologue"


def test_polling_a_slow_process_with_changing_output_is_not_a_loop():
    detector = LoopDetector()
    steps = [(STATUS, f"compiling module {i} of 12") for i in range(12)]
    assert record_all(detector, steps) == [None] * 12


def test_polling_interleaved_with_waiting_is_not_a_loop():
    detector = LoopDetector()
    steps = []
    for i in range(6):
        steps.append(('shell {"command": "sleep 5"}', ""))
        steps.append((STATUS, f"{i * 15}% done"))
    assert record_all(detector, steps) == [None] * 12


def test_continuing_after_the_warning_is_fatal():
    detector = LoopDetector()
    verdicts = record_all(detector, [(LS, "same")] * 4)
    assert verdicts[2].fatal is False
    assert verdicts[3].pattern == "repeat" and verdicts[3].fatal is True


def test_breaking_out_after_the_warning_ends_it():
    detector = LoopDetector()
    record_all(detector, [(LS, "same")] * 3)
    assert detector.record(CAT, "something new") is None
    # A later loop starts over with a warning, not a stop.
    verdicts = record_all(detector, [(STATUS, "x")] * 3)
    assert verdicts[2].pattern == "repeat" and verdicts[2].fatal is False


def test_reset_clears_the_window_and_the_warning():
    detector = LoopDetector()
    record_all(detector, [(LS, "same")] * 3)
    detector.reset()
    assert record_all(detector, [(LS, "same")] * 2) == [None, None]
    assert detector.record(LS, "same").fatal is False


def test_disabled_detection_never_reports():
    detector = LoopDetector(LoopDetectionConfig(enabled=False))
    assert record_all(detector, [(LS, "same")] * 10) == [None] * 10


def test_detection_is_deterministic_across_instances():
    steps = [(LS, "a"), (CAT, "b")] * 3 + [(None, "")] * 4
    first = record_all(LoopDetector(), steps)
    second = record_all(LoopDetector(), steps)
    assert first == second


# ── in the engine: one recovery message, then a loop_detected stop ───────────────────────────
from apps.engine.task import AgentTask  # noqa: E402
from apps.engine.tools import Tool, ToolResult  # noqa: E402
from tests.engine.helpers import (  # noqa: E402
    EchoTool,
    JobTool,
    ThinkTool,
    collect,
    of_type,
    scripted_engine,
)

TASK = AgentTask(task_id=1, goal="go")


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


class CountingFailure(Tool):
    name = "deploy"
    description = "Always fails, with a different message each time."
    input_schema = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.calls = 0

    async def execute(self) -> ToolResult:
        self.calls += 1
        raise ConnectionError(f"attempt {self.calls}: host unreachable")


async def test_repeating_model_gets_one_recovery_message_then_is_stopped():
    turns = [{"tool_calls": [call("echo", text="x")], "repeat": True}]
    engine, model = scripted_engine(turns, tools=[EchoTool()])
    events = await collect(engine, TASK)

    assert len(model.requests) == 4
    recovery = model.requests[3].messages[-1]
    assert recovery.role == "user" and "3 times in a row" in recovery.content
    errors = [e.data for e in of_type(events, "error")]
    assert [(e["fatal"], e["error_struct"]["error_code"]) for e in errors] == [
        (False, "loop_suspected"),
        (True, "loop_detected"),
    ]
    assert events[-1].data["status"] == "failed"


async def test_model_that_heeds_the_recovery_message_finishes():
    turns = [
        {"text": "Done differently.", "role": "user", "match": "Repeating it will not change"},
        {"tool_calls": [call("echo", text="x")], "repeat": True},
    ]
    engine, _ = scripted_engine(turns, tools=[EchoTool()])
    result = await engine.execute(TASK)
    assert result.status == "completed" and result.final == "Done differently."


async def test_alternating_actions_are_detected_in_the_engine():
    turns = [
        {"tool_calls": [call("echo", text="a")], "match": "^(go|B)$", "repeat": True},
        {"tool_calls": [call("echo", text="b")], "match": "^A$", "repeat": True},
        {"text": "Stopped alternating.", "role": "user", "match": "alternating"},
    ]
    engine, model = scripted_engine(turns, tools=[EchoTool()])
    result = await engine.execute(TASK)
    assert result.final == "Stopped alternating." and len(model.requests) == 7


async def test_same_call_failing_three_times_is_detected_in_the_engine():
    turns = [
        {"text": "I'll try another way.", "role": "user", "match": "failed 3 times"},
        {"tool_calls": [call("deploy")], "repeat": True},
    ]
    engine, _ = scripted_engine(turns, tools=[CountingFailure()])
    result = await engine.execute(TASK)
    assert result.final == "I'll try another way."


async def test_only_thinking_is_a_monologue():
    turns = [{"tool_calls": [call("think", thought=f"idea {i}")]} for i in range(5)]
    engine, model = scripted_engine(turns, tools=[ThinkTool()])
    result = await engine.execute(TASK)
    assert "took no action" in model.requests[4].messages[-1].content
    assert result.error.error_code == "loop_detected" and "monologue" in result.error.message


async def test_polling_a_slow_process_is_not_a_loop():
    job = JobTool(finished_after=8)
    turns = [
        {"text": "The build finished.", "after_tool": "job_status", "match": "^build: done$"},
        {"tool_calls": [call("job_status", job="build")], "repeat": True},
    ]
    engine, model = scripted_engine(turns, tools=[job])
    events = await collect(engine, TASK)
    assert job.polls == 8 and len(model.requests) == 9
    assert not of_type(events, "error")
    assert events[-1].data["status"] == "completed"
