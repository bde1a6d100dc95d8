"""Thinking and reasoning content over HTTP, through the fake LLM server (issue 28).

Anthropic extended thinking: the signed `thinking` / `redacted_thinking` blocks of a reply go
back first, unmodified, in the assistant message of the next request of a tool-use turn — the
fake refuses the request otherwise, as the API does. OpenAI-compatible `reasoning_content` /
`reasoning`: shown (the `reasoning` events) and never sent back — the fake refuses that too.
"""

from __future__ import annotations

import json

import httpx
import pytest

from apps.engine.config import parse_config
from apps.engine.llm.gateway import Gateway
from apps.engine.llm.types import ChatRequest, Message, ThinkingBlock, ToolCall
from apps.engine.loop.react import ReActEngine
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from tests.engine.helpers import EchoTool, no_sleep, of_type
from tests.engine.llm.conftest import TOOLS
from tests.fakes import llm_checks as checks
from tests.fakes.llm_server import FakeLLMServer, Fault

TASK = AgentTask(task_id=7, goal="Echo hello, then say what it gave.", system_prompt="Be exact.")
FIRST_THOUGHT = "The user wants an echo first; then I report it."
SECOND_THOUGHT = "The echo said HELLO, so the answer is HELLO."
SCRIPT = [
    {
        "thinking": FIRST_THOUGHT,
        "text": "Echoing.",
        "tool_calls": [{"name": "echo", "arguments": {"text": "hello"}}],
    },
    {"thinking": SECOND_THOUGHT, "text": "It gave HELLO.", "after_tool": "echo"},
]


def model_config(server: FakeLLMServer, provider: str, **extra) -> dict:
    entry = server.model_entry(provider, model="thinker", **extra)
    return parse_config(
        {
            "models": {"main": entry},
            "llm": {"retries": {"max_attempts": 1}, "timeout": {"read": 5}},
            "streaming": {"flush_interval_ms": 0},
        }
    )


async def run_task(cfg) -> list:
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        engine = ReActEngine(gateway, ToolSet([EchoTool()]), cfg)
        return [event async for event in engine.run(TASK)]


def reasoning_text(events) -> str:
    return "".join(event.data["text"] for event in of_type(events, "reasoning"))


def token_text(events) -> str:
    return "".join(event.data["text"] for event in of_type(events, "token"))


# ── Anthropic ──────────────────────────────────────────────────────────────────────────────────
async def test_anthropic_thinking_goes_back_first_and_unmodified_across_a_tool_use_turn():
    with FakeLLMServer(SCRIPT) as server:
        cfg = model_config(server, "anthropic", max_tokens=4096, thinking_budget=2048)
        events = await run_task(cfg)
        bodies = [request.body for request in server.requests]

    finished = of_type(events, "task_finished")[-1]
    assert finished.data["status"] == "completed", finished.data
    assert finished.data["final"] == "It gave HELLO."
    assert len(bodies) == 2
    for body in bodies:
        assert body["thinking"] == {"budget_tokens": 2048, "type": "enabled"}
        assert "temperature" not in body
    # The second request's assistant message: the signed thinking block first, byte for byte.
    assistant = [m for m in bodies[1]["messages"] if m["role"] == "assistant"][-1]
    assert assistant["content"][0] == {
        "signature": checks.thinking_signature(FIRST_THOUGHT),
        "thinking": FIRST_THOUGHT,
        "type": "thinking",
    }
    assert [block["type"] for block in assistant["content"]] == ["thinking", "text", "tool_use"]
    # Shown as reasoning, step by step; never mixed into the answer's text.
    assert reasoning_text(events) == FIRST_THOUGHT + SECOND_THOUGHT
    assert sorted({e.data["step"] for e in of_type(events, "reasoning")}) == [1, 2]
    assert FIRST_THOUGHT not in token_text(events)
    assert token_text(events) == "Echoing.It gave HELLO."


async def test_anthropic_unstreamed_reply_keeps_thinking_and_redacted_blocks_in_order():
    redacted = checks.redacted_data("the part the safety system hid")
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "thinker",
        "content": [
            {
                "type": "thinking",
                "thinking": FIRST_THOUGHT,
                "signature": checks.thinking_signature(FIRST_THOUGHT),
            },
            {"type": "redacted_thinking", "data": redacted},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 50},
    }
    from apps.engine.llm.providers.anthropic import parse_response

    reply = parse_response(answer)
    assert reply.thinking == (
        ThinkingBlock("thinking", FIRST_THOUGHT, checks.thinking_signature(FIRST_THOUGHT)),
        ThinkingBlock("redacted_thinking", data=redacted),
    )
    assert reply.reasoning == FIRST_THOUGHT
    assert reply.content == ""

    with FakeLLMServer(["Done."]) as server:
        cfg = model_config(server, "anthropic", max_tokens=4096, thinking_budget=1024)
        request = ChatRequest(
            (
                Message("user", "read a.py"),
                Message("assistant", "", tuple(reply.tool_calls), thinking=reply.thinking),
                Message("tool", "print('a')", tool_call_id="toolu_1", name="read_file"),
            ),
            tools=TOOLS,
        )
        async with Gateway(cfg, sleep=no_sleep) as gateway:
            done = await gateway.complete(request)
        sent = server.requests[-1].body["messages"][1]["content"]
    assert done.content == "Done."
    assert sent[:2] == [
        {
            "signature": checks.thinking_signature(FIRST_THOUGHT),
            "thinking": FIRST_THOUGHT,
            "type": "thinking",
        },
        {"data": redacted, "type": "redacted_thinking"},
    ]


def recorded_thinking_stream(thought: str, redacted: str) -> bytes:
    """An Anthropic stream as the API sends one with thinking: a thinking block (deltas, then
    its signature), a redacted block, then a tool call."""

    def frame(payload: dict) -> str:
        return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n"

    signature = checks.thinking_signature(thought)
    events = [
        {"type": "message_start", "message": {"id": "m", "model": "thinker", "usage": {}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": thought[:10]},
        },
        {"type": "ping"},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": thought[10:]},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": signature[:7]},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": signature[7:]},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "redacted_thinking", "data": redacted},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_9",
                "name": "read_file",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"path": "a.py"}'},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 80},
        },
        {"type": "message_stop"},
    ]
    return "".join(frame(event) for event in events).encode()


async def test_anthropic_streamed_thinking_and_redacted_blocks_round_trip_over_http():
    redacted = checks.redacted_data("hidden reasoning")
    body = recorded_thinking_stream(FIRST_THOUGHT, redacted)
    with FakeLLMServer(["Read it."]) as server:
        cfg = model_config(server, "anthropic", max_tokens=4096, thinking_budget=1024)
        server.fail_next(Fault.recorded_stream(body, chunk_size=37))
        first = ChatRequest((Message("user", "read a.py"),), tools=TOOLS)
        reasoning = []
        async with Gateway(cfg, sleep=no_sleep) as gateway:
            async for delta in gateway.stream(first):
                reasoning.append(delta.reasoning)
                if delta.response is not None:
                    reply = delta.response
            follow_up = ChatRequest(
                (
                    *first.messages,
                    Message(
                        "assistant", reply.content, tuple(reply.tool_calls), thinking=reply.thinking
                    ),
                    Message("tool", "x = 1", tool_call_id="toolu_9", name="read_file"),
                ),
                tools=TOOLS,
            )
            done = await gateway.complete(follow_up)
        sent = server.requests[-1].body["messages"][1]["content"]
    assert "".join(reasoning) == FIRST_THOUGHT
    assert reply.thinking == (
        ThinkingBlock("thinking", FIRST_THOUGHT, checks.thinking_signature(FIRST_THOUGHT)),
        ThinkingBlock("redacted_thinking", data=redacted),
    )
    assert reply.tool_calls[0].arguments == {"path": "a.py"}
    assert [block["type"] for block in sent] == ["thinking", "redacted_thinking", "tool_use"]
    assert done.content == "Read it."


async def test_a_tool_use_turn_begun_without_thinking_is_sent_without_it_not_refused():
    """A rebuilt history (a resumed run, a reply from a fallback model) has no thinking blocks
    for its last tool call: that request goes without thinking, as the API advises."""
    with FakeLLMServer([{"text": "Fine.", "repeat": True}]) as server:
        cfg = model_config(server, "anthropic", max_tokens=4096, thinking_budget=1024)
        request = ChatRequest(
            (
                Message("user", "read a.py"),
                Message("assistant", "", (ToolCall("toolu_1", "read_file", {"path": "a.py"}),)),
                Message("tool", "x = 1", tool_call_id="toolu_1", name="read_file"),
            ),
            tools=TOOLS,
        )
        async with Gateway(cfg, sleep=no_sleep) as gateway:
            reply = await gateway.complete(request)
            plain = await gateway.complete(ChatRequest((Message("user", "hi"),)))
        first, second = (r.body for r in server.requests)
    assert reply.content == "Fine." and plain.content == "Fine."
    assert "thinking" not in first
    assert second["thinking"] == {"budget_tokens": 1024, "type": "enabled"}


def test_the_fake_refuses_a_tool_use_turn_without_thinking_and_a_changed_signature():
    """The fake's rules that the tests above rely on, checked on raw requests."""
    with FakeLLMServer(["ok"]) as server:
        url = f"{server.anthropic_base_url}/v1/messages"
        headers = {"anthropic-version": "2023-06-01"}
        tool_use = {"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}
        result = {"type": "tool_result", "tool_use_id": "t1", "content": "x"}

        def send(assistant_blocks: list[dict]) -> httpx.Response:
            body = {
                "model": "m",
                "max_tokens": 4096,
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "messages": [
                    {"role": "user", "content": "go"},
                    {"role": "assistant", "content": assistant_blocks},
                    {"role": "user", "content": [result]},
                ],
            }
            return httpx.post(url, json=body, headers=headers)

        missing = send([tool_use])
        signed = {
            "type": "thinking",
            "thinking": "plan",
            "signature": checks.thinking_signature("plan"),
        }
        changed = send([{**signed, "thinking": "plan "}, tool_use])
        good = send([signed, tool_use])
    assert missing.status_code == 400
    assert "must start with a thinking block" in missing.json()["error"]["message"]
    assert changed.status_code == 400
    assert "Invalid `signature`" in changed.json()["error"]["message"]
    assert good.status_code == 200


# ── OpenAI-compatible ──────────────────────────────────────────────────────────────────────────
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_openai_reasoning_is_shown_and_never_sent_back(field):
    with FakeLLMServer(SCRIPT, reasoning_field=field) as server:
        cfg = model_config(server, "openai")
        events = await run_task(cfg)
        bodies = [request.body for request in server.requests]

    finished = of_type(events, "task_finished")[-1]
    assert finished.data["status"] == "completed", finished.data
    assert finished.data["final"] == "It gave HELLO."
    assert reasoning_text(events) == FIRST_THOUGHT + SECOND_THOUGHT
    assert token_text(events) == "Echoing.It gave HELLO."
    assistant = [m for m in bodies[1]["messages"] if m["role"] == "assistant"][-1]
    assert set(assistant) == {"role", "content", "tool_calls"}
    assert FIRST_THOUGHT not in json.dumps(bodies[1])


async def test_openai_unstreamed_reasoning_is_kept_for_display():
    with FakeLLMServer(SCRIPT[:1]) as server:
        cfg = model_config(server, "openai")
        async with Gateway(cfg, sleep=no_sleep) as gateway:
            reply = await gateway.complete(
                ChatRequest((Message("user", "echo"),), tools=TOOLS), model="main"
            )
    assert reply.reasoning == FIRST_THOUGHT
    assert reply.content == "Echoing."
    assert reply.thinking == ()


def test_the_fake_refuses_reasoning_content_sent_back():
    with FakeLLMServer(["ok"]) as server:
        body = {
            "model": "m",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "yes", "reasoning_content": "because"},
                {"role": "user", "content": "again"},
            ],
        }
        response = httpx.post(f"{server.openai_base_url}/chat/completions", json=body)
    assert response.status_code == 400
    assert "reasoning_content" in response.json()["error"]["message"]


async def test_reasoning_shown_before_a_retried_stream_failed_is_dropped_with_a_restart():
    with FakeLLMServer(SCRIPT) as server:
        entry = server.model_entry("openai", model="thinker")
        cfg = parse_config(
            {
                "models": {"main": entry},
                "llm": {"retries": {"max_attempts": 2, "initial_backoff": 0}},
                "streaming": {"flush_interval_ms": 0},
            }
        )
        server.fail_next(Fault.disconnect(after_chunks=3))  # mid-reasoning of the first call
        events = await run_task(cfg)
    finished = of_type(events, "task_finished")[-1]
    assert finished.data["status"] == "completed", finished.data
    reasoning = of_type(events, "reasoning")
    restarts = [i for i, event in enumerate(reasoning) if event.data.get("restart")]
    assert len(restarts) == 1
    assert reasoning[restarts[0]].data == {"step": 1, "text": "", "restart": True}
    shown_after = "".join(event.data["text"] for event in reasoning[restarts[0] + 1 :])
    assert shown_after == FIRST_THOUGHT + SECOND_THOUGHT
