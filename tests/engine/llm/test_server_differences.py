"""OpenAI-compatible servers that differ from OpenAI (the llama.cpp family, Ollama, LM Studio,
vLLM), each shown by the fake LLM server switched to behave like one: `content: null` refused
beside tool calls, the call's id and name repeated in every streamed fragment, no usage block."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from apps.engine.llm import ChatRequest, Gateway, Message, ToolCall
from tests.engine.llm.conftest import TOOLS, ask, config_for
from tests.fakes.llm_server import FakeLLMServer, Fault

CALL = {"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]}


@pytest.fixture
def llama_like() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(
        null_content_rejected=True, repeated_call_ids=True, usage_block=False
    ) as server:
        yield server


async def test_a_tool_call_turn_goes_back_with_empty_content_not_null(llama_like):
    llama_like.set_script([{"text": "Read it.", "repeat": True}])
    turn = Message("assistant", "", (ToolCall("call_1", "read_file", {"path": "a.py"}),))
    request = ChatRequest(
        (Message("user", "read a.py"), turn, Message("tool", "x = 1", (), "call_1", "read_file")),
        tools=TOOLS,
    )
    async with Gateway(config_for(llama_like, {"main": "openai"}, attempts=1)) as gateway:
        response = await gateway.complete(request)
    assert response.content == "Read it."
    sent = llama_like.requests[-1].body["messages"][1]
    assert sent["content"] == "" and sent["tool_calls"][0]["id"] == "call_1"


def llama_stream(fragments: list[str]) -> bytes:
    """A llama.cpp-style stream: every tool-call fragment repeats the call's id and name."""
    frames = []
    for piece in fragments:
        call = {"index": 0, "id": "call_Xy7", "type": "function"}
        call["function"] = {"name": "read_file", "arguments": piece}
        delta = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
        frames.append(f"data: {json.dumps(delta)}\n\n")
    frames.append(
        'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}\n\n'
    )
    frames.append("data: [DONE]\n\n")
    return "".join(frames).encode()


async def test_repeated_id_and_name_in_streamed_fragments_are_not_appended(llama_like):
    llama_like.fail_next(Fault.recorded_stream(llama_stream(['{"pa', 'th": "src/', 'app.py"}'])))
    async with Gateway(config_for(llama_like, {"main": "openai"}, attempts=1)) as gateway:
        async for delta in gateway.stream(ask("read it", tools=TOOLS)):
            response = delta.response
    (call,) = response.tool_calls
    assert (call.id, call.name) == ("call_Xy7", "read_file")
    assert call.arguments == {"path": "src/app.py"}


async def test_the_fake_server_repeats_ids_when_asked(llama_like):
    llama_like.set_script([CALL])
    async with Gateway(config_for(llama_like, {"main": "openai"}, attempts=1)) as gateway:
        async for delta in gateway.stream(ask("read it", tools=TOOLS)):
            response = delta.response
    (call,) = response.tool_calls
    assert call.name == "read_file" and call.arguments == {"path": "src/app.py"}
    assert call.id.count(call.id[:6]) == 1


@pytest.mark.parametrize("stream", [True, False])
async def test_usage_is_asked_for_and_estimated_when_none_comes_back(llama_like, stream):
    llama_like.set_script([{"text": "Paris is the capital of France.", "repeat": True}])
    async with Gateway(config_for(llama_like, {"main": "openai"}, attempts=1)) as gateway:
        if stream:
            async for delta in gateway.stream(ask("What is the capital of France?")):
                response = delta.response
        else:
            response = await gateway.complete(ask("What is the capital of France?"))
    if stream:
        assert llama_like.requests[-1].body["stream_options"] == {"include_usage": True}
    usage = response.usage
    assert usage.estimated
    assert usage.input_tokens >= len("What is the capital of France?") // 4
    assert usage.output_tokens >= len("Paris is the capital of France.") // 4
    assert usage.as_dict()["estimated"] is True


async def test_reported_usage_is_not_marked_estimated():
    with FakeLLMServer(script=[{"text": "Paris.", "repeat": True}]) as server:
        async with Gateway(config_for(server, {"main": "openai"}, attempts=1)) as gateway:
            response = await gateway.complete(ask("capital of France?"))
    assert not response.usage.estimated and "estimated" not in response.usage.as_dict()
    assert response.usage.input_tokens > 0
