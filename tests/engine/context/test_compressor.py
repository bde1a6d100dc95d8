"""Context compression (seed 001 U1: R13–R15, KTD1, R26, R27): the summary is asked of the
auxiliary model first, then the main model, then made deterministically; the conversation keeps
its first messages and recent tail, tool calls stay with their results, and the stable prompt
prefix stays cached. Models are aliases on the fake LLM server, reached over HTTP."""

from __future__ import annotations

import json

import pytest

from apps.engine.config import CompressionConfig, parse_config
from apps.engine.context.compressor import (
    DETERMINISTIC,
    SUMMARY_PREFIX,
    Compressor,
    deterministic_summary,
    split_points,
)
from apps.engine.llm.gateway import Gateway
from apps.engine.llm.types import ChatResponse, Message, ToolCall
from apps.engine.loop.react import ReActEngine
from apps.engine.task import AgentTask
from apps.engine.tools import Tool, ToolResult, ToolSet
from tests.engine.helpers import no_sleep
from tests.fakes.llm_server import FakeLLMServer, Fault

SUMMARY_TURN = {"text": "## Goal\nfix slug\n## Decisions\nAUX-OR-MAIN", "repeat": True}


def conversation(steps: int = 6) -> list[Message]:
    messages = [Message("user", "Fix the failing slug test in tests/test_slug.py")]
    for i in range(steps):
        call = ToolCall(f"c{i}", "str_replace_editor", {"path": f"f{i}.py", "old": "a" * 300})
        messages.append(Message("assistant", f"Editing f{i}.py.", (call,)))
        messages.append(
            Message("tool", f"edited f{i}.py\n" + "x" * 300, tool_call_id=f"c{i}", name=call.name)
        )
    messages.append(Message("assistant", "Now the tests."))
    return messages


def _cfg(server, **llm):
    return parse_config(
        {
            "models": {
                "main": server.model_entry("openai", model="main-model"),
                "fast": server.model_entry("openai", model="fast-model"),
            },
            "llm": {"retries": {"max_attempts": 1}, **llm},
            "streaming": {"flush_interval_ms": 0},
        }
    )


def _compressor(gateway, cfg, **overrides):
    compression = CompressionConfig(
        threshold_tokens=100, keep_first=1, keep_last=3, summary_max_tokens=64, **overrides
    )
    return Compressor(
        gateway,
        compression,
        main_model=cfg.llm.main,
        auxiliary_model=cfg.llm.auxiliary_model,
    )


async def _compress(server, *faults, **llm):
    cfg = _cfg(server, **llm)
    server.fail_next(*faults)
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        done = await _compressor(gateway, cfg).compress_if_needed(conversation())
    return done, [r.model for r in server.requests]


@pytest.fixture
def server():
    with FakeLLMServer([SUMMARY_TURN]) as running:
        yield running


# ── who writes the summary ─────────────────────────────────────────────────────────────────────
async def test_auxiliary_model_writes_the_summary_and_main_is_not_called(server):
    done, models = await _compress(server, auxiliary_model="fast")
    assert models == ["fast-model"]
    assert done.summarized_by == "fast" and done.failures == []
    assert "AUX-OR-MAIN" in done.messages[1].content


async def test_empty_auxiliary_answer_falls_back_to_the_main_model(server):
    done, models = await _compress(server, Fault.empty(model="fast-model"), auxiliary_model="fast")
    assert models == ["fast-model", "main-model"]
    assert done.summarized_by == "main" and "AUX-OR-MAIN" in done.messages[1].content
    assert done.failures and done.failures[0].startswith("fast:")


async def test_auxiliary_exception_falls_back_to_the_main_model(server):
    done, models = await _compress(
        server, Fault.http_error(500, model="fast-model"), auxiliary_model="fast"
    )
    assert models == ["fast-model", "main-model"] and done.summarized_by == "main"
    assert "LLMStatusError" in done.failures[0] or "500" in done.failures[0]


async def test_both_models_failing_gives_the_deterministic_summary(server):
    done, models = await _compress(
        server,
        Fault.http_error(500, model="fast-model"),
        Fault.http_error(500, model="main-model"),
        auxiliary_model="fast",
    )
    assert models == ["fast-model", "main-model"] and done.summarized_by == DETERMINISTIC
    summary = done.messages[1].content
    for heading in ("## Goal", "## Decisions", "## Files changed", "## Tests", "## Open items"):
        assert heading in summary
    assert "f1.py" in summary and "Fix the failing slug test" in summary


async def test_without_auxiliary_model_one_call_goes_to_main(server):
    done, models = await _compress(server)
    assert models == ["main-model"] and done.summarized_by == "main"


class WhitespaceThenText:
    """A model client port: whitespace from one alias (a provider that does not refuse it)."""

    def __init__(self):
        self.calls: list[str] = []

    async def complete(self, request, *, model=None):
        self.calls.append(model)
        return ChatResponse(content="  \n " if model == "fast" else "## Goal\nmain wrote it")


async def test_whitespace_summary_counts_as_a_failure_of_that_tier():
    client = WhitespaceThenText()
    compressor = Compressor(
        client,
        CompressionConfig(threshold_tokens=100, keep_first=1, keep_last=3, summary_max_tokens=64),
        main_model="main",
        auxiliary_model="fast",
    )
    done = await compressor.compress_if_needed(conversation())
    assert client.calls == ["fast", "main"] and done.summarized_by == "main"
    assert done.failures == ["fast: empty summary"]


def test_auxiliary_model_is_read_from_config_and_handed_to_the_compressor():
    cfg = parse_config(
        {
            "models": {"main": {"provider": "scripted"}, "fast": {"provider": "scripted"}},
            "llm": {"auxiliary_model": "fast"},
            "compression": {"threshold_tokens": 5000, "keep_last": 4},
        }
    )
    assert cfg.llm.auxiliary_model == "fast"
    compressor = Compressor.from_config(Gateway(cfg), cfg)
    assert compressor.auxiliary_model == "fast" and compressor.main_model == "main"
    assert compressor.threshold == 5000 and compressor.config.keep_last == 4
    off = parse_config({"compression": {"enabled": False}})
    assert Compressor.from_config(Gateway(off), off) is None


async def test_summarizer_call_is_audited_and_never_uses_prompt_caching():
    with FakeLLMServer([SUMMARY_TURN]) as server:
        cfg = parse_config({"models": {"main": server.model_entry("anthropic")}})
        async with Gateway(cfg, sleep=no_sleep) as gateway:
            done = await _compressor(gateway, cfg).compress_if_needed(conversation())
        body = server.requests[0].body
    assert "cache_control" not in json.dumps(body) and isinstance(body["system"], str)
    data = done.event_data()
    assert data["agent"] == "compressor" and data["task_type"] == "summarization"


# ── where the cut goes ─────────────────────────────────────────────────────────────────────────
def test_cut_points_never_separate_a_tool_call_from_its_result():
    messages = conversation(4)  # user, (assistant+tool) x4, assistant
    for keep_first in range(1, 5):
        for keep_last in range(1, 8):
            head_end, tail_start = split_points(messages, keep_first, keep_last)
            for side in (messages[:head_end], messages[head_end:tail_start], messages[tail_start:]):
                called = {c.id for m in side for c in m.tool_calls}
                answered = {m.tool_call_id for m in side if m.role == "tool"}
                assert called == answered, (keep_first, keep_last)


async def test_compression_keeps_the_first_messages_and_tail_and_puts_the_summary_between(server):
    done, _ = await _compress(server)
    original = conversation()
    assert done.messages[0] == original[0]
    assert done.messages[1].content.startswith(SUMMARY_PREFIX)
    assert done.messages[2:] == original[-3:]
    assert done.tokens_after < done.tokens_before and done.messages_summarized == len(original) - 4


async def test_below_the_threshold_nothing_changes(server):
    cfg = _cfg(server)
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        compressor = _compressor(gateway, cfg)
        compressor.config = CompressionConfig(threshold_tokens=100_000)
        assert await compressor.compress_if_needed(conversation()) is None
    assert server.requests == []


def test_deterministic_summary_lists_tests_and_open_items():
    call = ToolCall("t1", "run_tests", {"command": "pytest -x"})
    messages = [
        Message("assistant", "Running the tests.", (call,)),
        Message("tool", "1 failed: test_slug", tool_call_id="t1", name="run_tests", is_error=True),
    ]
    summary = deterministic_summary(messages, goal="fix slug")
    assert "run_tests" in summary.split("## Tests and their state")[1]
    assert "1 failed" in summary.split("## Open items")[1]


# ── inside a run ───────────────────────────────────────────────────────────────────────────────
class ReadTool(Tool):
    name = "read"
    description = "Read a big file."
    input_schema = {"type": "object", "properties": {}}

    def __init__(self):
        self.calls = 0

    async def execute(self) -> ToolResult:
        self.calls += 1
        return ToolResult.success(f"page {self.calls}\n" + "lorem ipsum " * 150)


class UsageLog:
    """The gateway, noting the usage of each agent step (a port wrapper, not a patch)."""

    def __init__(self, gateway):
        self.gateway, self.steps = gateway, []

    async def stream(self, request, *, model=None):
        async for delta in self.gateway.stream(request, model=model):
            if delta.response is not None:
                self.steps.append(delta.response.usage)
            yield delta

    async def complete(self, request, *, model=None):
        return await self.gateway.complete(request, model=model)


async def test_a_long_run_compresses_emits_the_event_and_keeps_the_stable_cache():
    script = [
        {
            "text": "## Goal\nread pages\n## Decisions\nkeep reading",
            "match": "Transcript to summarize",
            "repeat": True,
        },
        {"text": "All pages read.", "match": "^page 12\\n", "repeat": True},
        {"text": "Reading.", "tool_calls": [{"name": "read", "arguments": {}}], "repeat": True},
    ]
    with FakeLLMServer(script, anthropic_min_cacheable_tokens=64) as server:
        cfg = parse_config(
            {
                "models": {
                    "main": server.model_entry("anthropic", model="main-model"),
                    "fast": server.model_entry("anthropic", model="fast-model"),
                },
                "llm": {"auxiliary_model": "fast"},
                "streaming": {"flush_interval_ms": 0},
                "compression": {
                    "threshold_tokens": 2500,
                    "keep_first": 1,
                    "keep_last": 4,
                    "summary_max_tokens": 256,
                },
            }
        )
        task = AgentTask(task_id=1, goal="read every page", system_prompt="Read carefully. " * 60)
        async with Gateway(cfg, sleep=no_sleep) as gateway:
            model = UsageLog(gateway)
            events = [e async for e in ReActEngine(model, ToolSet([ReadTool()]), cfg).run(task)]
        requests = server.requests
    assert events[-1].data["status"] == "completed", events[-1].data
    compressions = [e for e in events if e.type == "compression"]
    assert compressions, "the run never compressed"
    data = compressions[0].data
    assert data["summarized_by"] == "fast" and data["tokens_after"] < data["tokens_before"]
    # The main model's requests: the one right after a compression still starts with the same
    # tools + stable system block, and its first messages; the summary comes after them.
    main_calls = [r.body for r in requests if r.model == "main-model"]
    stable = main_calls[0]["system"][0]
    assert all(body["system"][0] == stable for body in main_calls)
    after = next(b for b in main_calls if SUMMARY_PREFIX in json.dumps(b["messages"]))
    assert after["messages"][0]["content"][0]["text"] == "read every page"
    assert SUMMARY_PREFIX in json.dumps(after["messages"][0]["content"][1:])
    # The compressing step still reads tools + stable block from the cache; the step after it
    # reads the whole prompt the compressing step sent (and wrote).
    step = compressions[0].data["step"]
    squeezed, following = model.steps[step - 1], model.steps[step]
    stable_tokens = (len(json.dumps(stable)) + len(json.dumps(main_calls[0]["tools"]))) // 4
    assert squeezed.cache_read_tokens >= stable_tokens * 0.9
    assert squeezed.cache_read_tokens < squeezed.input_tokens * 0.9  # the prefix did change
    assert following.cache_read_tokens >= squeezed.input_tokens


def test_default_threshold_is_half_the_context_window_of_the_runs_model():
    cfg = parse_config(
        {
            "models": {
                "main": {"provider": "scripted", "context_window": 200_000},
                "small": {"provider": "scripted", "context_window": 8_000},
            }
        }
    )
    compressor = Compressor.from_config(Gateway(cfg), cfg)
    assert compressor.threshold == 100_000
    assert compressor.threshold_for("small") == 4_000


async def test_request_after_long_history_is_kept_verbatim_and_is_the_summary_goal(server):
    history = [Message("user", "earlier question"), Message("assistant", "earlier answer " * 50)]
    goal = "Fix the failing slug test in tests/test_slug.py"
    messages = [*history, *conversation()]  # conversation() starts with the request
    cfg = _cfg(server)
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        compressor = _compressor(gateway, cfg)
        compressor.config = CompressionConfig(
            threshold_tokens=100, keep_first=2, keep_last=3, summary_max_tokens=64
        )
        done = await compressor.compress_if_needed(messages, goal=goal)
    assert done.messages[:2] == history
    assert done.messages[2].content.endswith(f"## The current request (verbatim)\n{goal}")
    asked = server.requests[0].body["messages"][-1]["content"]
    assert asked.startswith(f"The task's goal: {goal}")


def test_a_second_deterministic_summary_carries_the_first_one_forward():
    first = deterministic_summary(conversation(2), goal="fix slug")
    note = Message("user", f"{SUMMARY_PREFIX}: 4 messages replaced]\n\n{first}")
    second = deterministic_summary([note, *conversation(1)[1:]], goal="fix slug")
    assert second.startswith("## Earlier summary\n## Goal\nfix slug")
    assert "f1.py" in second  # a file from the first summary is still there


async def test_a_middle_smaller_than_a_summary_is_left_alone(server):
    cfg = _cfg(server)
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        compressor = _compressor(gateway, cfg)
        compressor.config = CompressionConfig(
            threshold_tokens=100, keep_first=1, keep_last=3, summary_max_tokens=2_000
        )
        assert await compressor.compress_if_needed(conversation()) is None
    assert server.requests == []
