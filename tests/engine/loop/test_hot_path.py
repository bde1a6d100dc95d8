"""The cheaper forms of per-step work give exactly what the plain forms give: the running prompt
size, trusted events, the usage so far, and the loop detector's running counts (checked against
the window-scanning rules it replaced, over random step sequences)."""

from __future__ import annotations

import dataclasses
import inspect
import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.engine.config import LoopDetectionConfig
from apps.engine.context.compressor import PromptSize, estimate_prompt_tokens
from apps.engine.context.prompt import canonical_tools
from apps.engine.events import Event
from apps.engine.llm.types import (
    ChatRequest,
    Message,
    TextBlock,
    ToolCall,
    ToolSpec,
    Usage,
    sorted_arguments,
    sorted_json,
)
from apps.engine.loop.detection import LoopDetector
from apps.engine.loop.state import RunState
from apps.engine.task import AgentTask, UsageTotals

SYSTEM = (TextBlock("You are careful.", cache=True), TextBlock("Today is Monday."))
TOOLS = (ToolSpec("shell", "Runs a command.", {"type": "object", "properties": {}}),)


def call_message(index: int) -> Message:
    call = ToolCall(f"c{index}", "shell", {"command": f"ls {index}", "b": [1, "ü"]}, "{}")
    return Message("assistant", f"step {index}", (call,))


def test_prompt_size_follows_appends_new_lists_and_shrinking_lists_exactly():
    size, messages = PromptSize(), [Message("user", "fix the bug")]
    for index in range(6):
        assert size.tokens(messages, SYSTEM, TOOLS) == estimate_prompt_tokens(
            messages, SYSTEM, TOOLS
        )
        messages.append(call_message(index))
        messages.extend([Message("tool", "x" * index, tool_call_id=f"c{index}", name="shell")])
    compressed = [messages[0], Message("user", "[Summary ...]"), *messages[-2:]]  # a new list
    assert size.tokens(compressed, SYSTEM, TOOLS) == estimate_prompt_tokens(
        compressed, SYSTEM, TOOLS
    )
    del messages[3:]  # the same list, shorter
    assert size.tokens(messages, SYSTEM, TOOLS) == estimate_prompt_tokens(messages, SYSTEM, TOOLS)
    messages[-1] = Message("user", "a replaced last message, longer than the one before")
    assert size.tokens(messages, SYSTEM, TOOLS) == estimate_prompt_tokens(messages, SYSTEM, TOOLS)
    other_system = (TextBlock("Another system prompt, much longer than the first one."),)
    assert size.tokens(messages, other_system, ()) == estimate_prompt_tokens(messages, other_system)


def test_a_run_states_events_are_numbered_in_order_and_keep_their_data():
    run = RunState(AgentTask(task_id="t-9", goal="go"))
    before = datetime.now(UTC)
    first = run.event("task_started", mode="react")
    data = {"step": 1, "text": "Hello"}
    second = run.event_of("token", data)
    after = datetime.now(UTC)
    for event, seq, kind, payload in ((first, 1, "task_started", {"mode": "react"}),
                                      (second, 2, "token", data)):  # fmt: skip
        assert before <= event.ts <= after and event.ts.tzinfo is UTC
        assert event == Event(type=kind, task_id="t-9", seq=seq, ts=event.ts, data=payload)
        assert event.as_json()["seq"] == seq and event.as_json()["ts"].endswith("Z")
        assert dataclasses.replace(event, seq=7).seq == 7 and event.seq == seq
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.seq = 8  # type: ignore[misc]
    assert second.data is data and run.seq == 2


def test_sorted_arguments_are_the_sorted_json_of_each_call_asked_again_or_in_turn():
    first = ToolCall("a", "shell", {"z": 1, "a": ["ü", {"b": 2, "a": 1}]})
    twin = ToolCall("b", "shell", {"z": 1, "a": ["ü", {"b": 2, "a": 1}]})  # equal, not the same
    other = ToolCall("c", "shell", {"command": "ls"})
    for call in (first, first, twin, other, first, other, other):
        assert sorted_arguments(call) == json.dumps(call.arguments, sort_keys=True)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_sorted_json_is_json_dumps_with_sorted_keys(value):
    assert sorted_json(value) == json.dumps(value, sort_keys=True)


def test_sorted_json_fails_as_json_dumps_fails():
    cycle: dict = {}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="Circular reference"):
        sorted_json({"a": [cycle]})
    with pytest.raises(TypeError, match="not JSON serializable"):
        sorted_json({"a": object()})


def test_the_initialisers_take_the_fields_in_order_with_their_defaults():
    for cls in (Message, ChatRequest):
        fields = dataclasses.fields(cls)
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
        assert [p.name for p in parameters] == [f.name for f in fields]
        assert [p.default for p in parameters] == [
            inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
            for f in fields
        ]
    call = ToolCall("c1", "shell", {})
    message = Message("tool", "out", (call,), "c1", "shell", True)
    assert [getattr(message, f.name) for f in dataclasses.fields(Message)] == [
        "tool", "out", (call,), "c1", "shell", True, ()
    ]  # fmt: skip
    request = ChatRequest((message,), SYSTEM, TOOLS, 100, 0.5)
    assert [getattr(request, f.name) for f in dataclasses.fields(ChatRequest)] == [
        (message,), SYSTEM, TOOLS, 100, 0.5, None, None, None
    ]  # fmt: skip
    assert dataclasses.replace(message, content="x") == Message(
        "tool", "x", (call,), "c1", "shell", True
    )
    assert hash(Message("user", "hi")) == hash(Message("user", "hi"))


def test_a_schema_gets_the_same_canonical_form_made_once_or_kept():
    schema = {"type": "object", "properties": {"b": {"type": "string"}, "a": {"minimum": 1}}}
    spec = ToolSpec("t", "T", schema)
    first, again = canonical_tools([spec]), canonical_tools([spec])
    assert first == again
    assert json.dumps(first[0].input_schema) == json.dumps(schema, sort_keys=True)
    other = ToolSpec("t", "T", {"type": "object", "properties": {"c": {}}})
    assert json.dumps(canonical_tools([other])[0].input_schema) == json.dumps(
        {"properties": {"c": {}}, "type": "object"}
    )


def test_the_usage_so_far_is_the_usage_totals_dump():
    run = RunState(AgentTask(task_id=1, goal="g"))
    run.usage, run.llm_calls = Usage(1200, 40, 1000, 150), 3
    assert run.usage_so_far() == UsageTotals.of(run.usage, 3).model_dump()
    assert list(run.usage_so_far()) == list(UsageTotals.of(run.usage, 3).model_dump())


class WindowRules:
    """The detector's rules as they were written first: scan the window's tail at every step."""

    def __init__(self, config: LoopDetectionConfig):
        self.config, self.window, self.warned = config, [], False
        self.size = max(
            config.repeat_threshold,
            config.error_threshold,
            config.alternation_window,
            config.monologue_threshold,
        )

    def reset(self):
        self.window, self.warned = [], False

    def record(self, action, observation="", *, error=False):
        entry = (
            (None, "no-action", False) if action is None else (action, (action, observation), error)
        )
        self.window = [*self.window, entry][-self.size :]
        found = self.find()
        if found is None:
            self.warned = False
            return None
        fatal, self.warned = self.warned, True
        return found, fatal

    def tail(self, count):
        return self.window[-count:] if len(self.window) >= count else None

    def find(self):
        cfg, last = self.config, self.window[-1]
        if last[0] is not None:
            tail = self.tail(cfg.repeat_threshold)
            if tail and all(e[1] == last[1] for e in tail):
                return "repeat"
            tail = self.tail(cfg.error_threshold)
            if tail and all(e[0] == last[0] and e[2] for e in tail):
                return "error_repeat"
            tail = self.tail(cfg.alternation_window)
            if tail:
                a, b = tail[-2], tail[-1]
                if a[0] is not None and b[0] is not None and a[1] != b[1]:
                    pattern = (b[1], a[1])
                    if all(e[1] == pattern[back % 2] for back, e in enumerate(reversed(tail))):
                        return "alternation"
        else:
            tail = self.tail(cfg.monologue_threshold)
            if tail and all(e[0] is None for e in tail):
                return "monologue"
        return None


steps = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["A", "B", "C"]), st.sampled_from(["x", "y"]), st.booleans()),
        st.just(None),  # a reply without action
        st.just("reset"),
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(
    sequence=steps,
    thresholds=st.tuples(
        st.integers(2, 4), st.integers(2, 4), st.integers(3, 7), st.integers(2, 5)
    ),
)
def test_the_loop_detector_gives_the_verdicts_of_the_window_rules(sequence, thresholds):
    repeat, error, window, monologue = thresholds
    config = LoopDetectionConfig(
        repeat_threshold=repeat,
        error_threshold=error,
        alternation_window=window,
        monologue_threshold=monologue,
    )
    detector, reference = LoopDetector(config), WindowRules(config)
    for step in sequence:
        if step == "reset":
            detector.reset()
            reference.reset()
            continue
        if step is None:
            verdict, expected = detector.record(None), reference.record(None)
        else:
            action, observation, failed = step
            verdict = detector.record(action, observation, error=failed)
            expected = reference.record(action, observation, error=failed)
        got = None if verdict is None else (verdict.pattern, verdict.fatal)
        assert got == expected, (sequence, step)
