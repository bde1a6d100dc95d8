"""The repository map in the system prompt: its own block between the stable and the volatile
block, with a cache breakpoint of its own, so the next task in the same workspace reads the map
from the cache too; checked on the wire of the fake LLM server."""

from __future__ import annotations

import datetime as dt
import json

from apps.engine.config import parse_config
from apps.engine.context.prompt import build_system_prompt
from apps.engine.llm.gateway import Gateway
from apps.engine.loop.react import ReActEngine
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from tests.engine.helpers import EchoTool, no_sleep
from tests.fakes.llm_server import FakeLLMServer
from tests.fakes.llm_wire_anthropic import anthropic_cache_blocks

DAY = dt.date(2026, 6, 29)
SKILL = "You are a careful engineer. " * 40
MAP = "## Repository map\nFiles:\nsrc/\n  app.py: main, " + ", ".join(
    f"helper_{i}" for i in range(60)
)
SCRIPT = [
    {"text": "Echoing.", "tool_calls": [{"name": "echo", "arguments": {"text": "a"}}]},
    {"text": "Done.", "after_tool": "echo"},
]


def _task(task_id, *, pitfalls="", repo_map=MAP, mode="react"):
    return AgentTask(
        task_id=task_id,
        goal="echo a",
        mode=mode,
        system_prompt=SKILL,
        pitfalls=pitfalls,
        repo_map=repo_map,
    )


async def _run(server, provider, task, **extra):
    cfg = parse_config(
        {
            "models": {"main": server.model_entry(provider)},
            "streaming": {"flush_interval_ms": 0},
            "compression": {"enabled": False},
            **extra,
        }
    )
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        result = await ReActEngine(gateway, ToolSet([EchoTool()]), cfg).execute(task)
    assert result.status == "completed", result
    return result


def test_map_is_a_cached_block_after_the_unchanged_stable_block_and_before_the_volatile_one():
    without = build_system_prompt(mode="react", skill_prompt=SKILL, pitfalls="P", today=DAY)
    blocks = build_system_prompt(
        mode="react", skill_prompt=SKILL, pitfalls="P", repo_map=MAP, today=DAY
    )

    assert [block.text for block in blocks] == [without[0].text, MAP, without[1].text]
    assert [block.cache for block in blocks] == [True, True, False]


def test_no_map_block_in_direct_chat_when_empty_or_without_caching_no_breakpoint():
    chat = build_system_prompt(mode="direct_chat", repo_map=MAP, today=DAY)
    empty = build_system_prompt(mode="react", skill_prompt=SKILL, repo_map="  ", today=DAY)
    plain = build_system_prompt(mode="react", skill_prompt=SKILL, repo_map=MAP, cache=False)

    assert all(MAP not in block.text for block in (*chat, *empty))
    assert len(empty) == 2
    assert plain[1].text == MAP and not any(block.cache for block in plain)


async def test_next_task_in_the_workspace_reads_the_map_from_the_anthropic_cache():
    with FakeLLMServer(SCRIPT, anthropic_min_cacheable_tokens=64) as server:
        await _run(server, "anthropic", _task(1, pitfalls="first pitfall"))
        server.set_script(["Done."])
        second = await _run(server, "anthropic", _task(2, pitfalls="another pitfall"))
        bodies = [r.body for r in server.requests]
    for body in bodies:
        system = body["system"]
        assert [block["text"] for block in system[:2]] == [
            bodies[0]["system"][0]["text"],
            MAP,
        ]
        assert system[1]["cache_control"] == {"type": "ephemeral"}
        assert "cache_control" not in system[2]
        assert json.dumps(body).count('"cache_control"') <= 4
    # The second task's only call read the tools, the stable block and the map: everything
    # before its pitfalls, which changed.
    blocks = anthropic_cache_blocks(bodies[-1])
    through_map = len(bodies[-1]["tools"]) + 2
    prefix_chars = sum(len(block.text) for block in blocks[:through_map])
    assert second.usage.cache_read_tokens == (prefix_chars + 3) // 4


async def test_openai_system_string_is_stable_then_map_then_volatile():
    with FakeLLMServer(SCRIPT) as server:
        await _run(server, "openai", _task(1, pitfalls="first pitfall"))
        system = server.requests[0].body["messages"][0]["content"]
    assert system.index(SKILL.strip()) < system.index(MAP) < system.index("first pitfall")
