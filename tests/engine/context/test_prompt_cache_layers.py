"""Prompt-cache layers (seed 003 U2, R4–R7 and R13): a stable system block with the breakpoint,
a volatile block after it, a breakpoint that moves with the conversation, deterministic tools —
checked on the wire of the fake LLM server, whose cache accounting is the services' rules."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from apps.engine.config import parse_config
from apps.engine.context.prompt import (
    PITFALLS_HEADING,
    build_system_prompt,
    canonical_tools,
    read_notes,
)
from apps.engine.llm.gateway import Gateway
from apps.engine.llm.types import ToolSpec
from apps.engine.loop.react import ReActEngine
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from tests.engine.helpers import EchoTool, no_sleep
from tests.fakes.llm_server import FakeLLMServer

DAY = dt.date(2026, 6, 29)
SKILL = "You are a careful engineer. " * 40  # long enough to be worth caching
SCRIPT = [
    {"text": "Echoing.", "tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]},
    {"text": "Once more.", "tool_calls": [{"name": "echo", "arguments": {"text": "b"}}]},
    {"text": "Done.", "after_tool": "echo", "match": "^B$"},
]


def _config(server, provider, **extra):
    return parse_config(
        {
            "models": {"main": server.model_entry(provider)},
            "streaming": {"flush_interval_ms": 0},
            "compression": {"enabled": False},
            **extra,
        }
    )


async def _run(server, provider, task, **extra):
    cfg = _config(server, provider, **extra)
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        engine = ReActEngine(gateway, ToolSet([EchoTool()]), cfg)
        result = await engine.execute(task)
    assert result.status == "completed", result
    return result


def _task(task_id, *, pitfalls="", notes=""):
    return AgentTask(
        task_id=task_id, goal="echo a then b", system_prompt=SKILL, pitfalls=pitfalls, notes=notes
    )


# ── R4, R5: the two blocks ───────────────────────────────────────────────────────────────────────
def test_stable_block_is_byte_identical_while_volatile_material_changes():
    first = build_system_prompt(
        mode="react", skill_prompt=SKILL, tool_names=["b", "a"], pitfalls="P1", today=DAY
    )
    second = build_system_prompt(
        mode="react",
        skill_prompt=SKILL,
        tool_names=["a", "b"],
        pitfalls="P2",
        notes="use tabs",
        facts={"workspace": "demo"},
        today=DAY + dt.timedelta(days=1),
    )
    assert first[0].text.encode() == second[0].text.encode()
    assert first[0].cache and not first[1].cache  # stable first with the breakpoint
    assert first[1].text != second[1].text
    for text in ("P1", "P2", "use tabs", "demo", "2026-06-"):
        assert text not in first[0].text


def test_empty_pitfalls_add_no_bytes_and_nothing_volatile_means_one_block():
    plain = build_system_prompt(mode="react", notes="N", today=DAY)
    empty = build_system_prompt(mode="react", notes="N", pitfalls="  ", today=DAY)
    assert plain == empty and PITFALLS_HEADING not in plain[1].text
    with_pitfalls = build_system_prompt(mode="react", pitfalls="avoid X", today=DAY)
    assert with_pitfalls[1].text.startswith(f"{PITFALLS_HEADING}\navoid X")
    only_stable = build_system_prompt(mode="react", with_date=False)
    assert len(only_stable) == 1 and only_stable[0].cache


def test_volatile_block_orders_pitfalls_notes_facts_then_the_date():
    _, volatile = build_system_prompt(
        mode="react", pitfalls="P", notes="N", facts={"z": "1", "a": "2"}, today=DAY
    )
    text = volatile.text
    assert text.index("Pitfalls") < text.index("AGENTS.md") < text.index("- a: 2")
    assert text.index("- a: 2") < text.index("- z: 1") < text.index("Today is 2026-06-29.")


def test_agents_md_is_read_from_the_workspace_and_capped(tmp_path):
    assert read_notes(tmp_path) == ""
    (tmp_path / "AGENTS.md").write_text("Run make test.\n" + "x" * 20_000)
    notes = read_notes(tmp_path, limit=100)
    assert notes.startswith("Run make test.") and len(notes) < 200 and "cut at 100" in notes


def test_tool_definitions_are_sorted_with_sorted_schema_keys():
    a = ToolSpec("b_tool", "B", {"type": "object", "properties": {"y": {}, "x": {}}})
    b = ToolSpec("a_tool", "A", {"properties": {"x": {}, "y": {}}, "type": "object"})
    one = canonical_tools([a, b])
    two = canonical_tools(
        [b, ToolSpec("b_tool", "B", {"properties": {"x": {}, "y": {}}, "type": "object"})]
    )
    assert [t.name for t in one] == ["a_tool", "b_tool"]
    assert json.dumps([t.input_schema for t in one]) == json.dumps([t.input_schema for t in two])


# ── R6: Anthropic content blocks with cache_control, a moving breakpoint ────────────────────────
async def test_anthropic_gets_cache_control_on_the_stable_block_and_a_moving_breakpoint():
    with FakeLLMServer(SCRIPT, anthropic_min_cacheable_tokens=64) as server:
        result = await _run(server, "anthropic", _task(1, pitfalls="avoid X"))
        bodies = [r.body for r in server.requests]
    assert len(bodies) == 3
    for body in bodies:
        system = body["system"]
        assert isinstance(system, list) and len(system) == 2
        assert system[0]["cache_control"] == {"type": "ephemeral"}
        assert "cache_control" not in system[1] and "avoid X" in system[1]["text"]
        assert system[0]["text"] == bodies[0]["system"][0]["text"]  # byte-stable across steps
        marks = json.dumps(body).count('"cache_control"')
        assert marks <= 4
        last = body["messages"][-1]["content"][-1]
        assert last["cache_control"] == {"type": "ephemeral"}  # the breakpoint moved here
    # Every warm step reads what the step before wrote.
    usage = result.usage
    assert usage.cache_read_tokens > 0 and usage.cache_write_tokens > 0


async def test_changed_volatile_block_keeps_the_stable_prefix_cached_on_anthropic():
    with FakeLLMServer(SCRIPT, anthropic_min_cacheable_tokens=64) as server:
        await _run(server, "anthropic", _task(1, pitfalls="first pitfall"))
        server.set_script(SCRIPT)
        second = await _run(server, "anthropic", _task(2, pitfalls="another pitfall", notes="N"))
        first_call = server.requests[3].body
    stable_tokens = (len(first_call["system"][0]["text"]) + 3) // 4
    assert second.usage.cache_read_tokens >= stable_tokens  # first call of task 2 read the stable
    assert first_call["system"][0]["text"] == server.requests[0].body["system"][0]["text"]


# ── R6 edge: OpenAI-compatible gets one string, stable first ────────────────────────────────────
async def test_openai_gets_one_system_string_stable_first_and_prefix_cache_hits():
    with FakeLLMServer(SCRIPT, openai_min_cached_tokens=128, openai_cache_step=16) as server:
        await _run(server, "openai", _task(1, pitfalls="first"))
        server.set_script(SCRIPT)
        second = await _run(server, "openai", _task(2, pitfalls="second"))
        bodies = [r.body for r in server.requests]
    system = bodies[0]["messages"][0]
    assert system["role"] == "system" and isinstance(system["content"], str)
    assert system["content"].startswith("You are agentkit") and SKILL.strip() in system["content"]
    assert system["content"].index(SKILL.strip()) < system["content"].index("first")
    assert second.usage.cache_read_tokens > 0


# ── R13: prompt_cache.enabled false → the plain prompt ──────────────────────────────────────────
async def test_disabled_prompt_cache_sends_a_plain_string_without_breakpoints():
    with FakeLLMServer(SCRIPT, anthropic_min_cacheable_tokens=64) as server:
        result = await _run(
            server, "anthropic", _task(1, pitfalls="avoid X"), prompt_cache={"enabled": False}
        )
        bodies = [r.body for r in server.requests]
    for body in bodies:
        assert isinstance(body["system"], str) and "cache_control" not in json.dumps(body)
        assert body["system"].startswith("You are agentkit") and "avoid X" in body["system"]
    assert result.usage.cache_read_tokens == 0 and result.usage.cache_write_tokens == 0


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_tools_on_the_wire_are_identical_whatever_order_they_were_registered(provider):
    class Zed(EchoTool):
        name = "zed"
        input_schema = {"required": ["text"], "type": "object", "properties": {"text": {}}}

    bodies = []
    for tools in ([EchoTool(), Zed()], [Zed(), EchoTool()]):
        with FakeLLMServer(["ok"]) as server:
            cfg = _config(server, provider)
            async with Gateway(cfg, sleep=no_sleep) as gateway:
                await ReActEngine(gateway, ToolSet(tools), cfg).execute(_task(1))
            bodies.append(json.dumps(server.requests[0].body["tools"]))
    assert bodies[0] == bodies[1] and bodies[0].index('"echo"') < bodies[0].index('"zed"')
