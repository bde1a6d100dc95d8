"""Recorded-format streams folded into final responses by the providers' pure `accumulate`."""

from __future__ import annotations

import json
import logging

import pytest

from apps.engine.llm import (
    AuthenticationError,
    LLMConnectionError,
    LLMStatusError,
    RateLimitError,
)
from apps.engine.llm.providers import anthropic, openai
from apps.engine.llm.sse import ServerSentEvent, StreamSnapshot, decode_all
from apps.engine.llm.types import SYNTHETIC_ID_PREFIX
from tests.engine.llm.conftest import recording


def replay(module, data: bytes, *, chunk: int = 0, require_done: bool = True):
    """Feed `data` (in `chunk`-byte pieces) through decoder + accumulator; (texts, response)."""
    pieces = [data] if not chunk else [data[i : i + chunk] for i in range(0, len(data), chunk)]
    snapshot = StreamSnapshot()
    texts = []
    for event in decode_all(pieces):
        text = module.accumulate(event, snapshot)
        if text:
            texts.append(text)
    return texts, snapshot.finish(require_done=require_done)


@pytest.mark.parametrize("chunk", [0, 1, 13])
def test_openai_text_stream_with_null_choices_usage_chunk(chunk):
    texts, response = replay(openai, recording("openai_text.sse"), chunk=chunk)
    assert "".join(texts) == response.content == "Crème brûlée 🍮 is done."
    assert response.finish_reason == "stop"
    assert response.model == "gpt-4.1-mini-2025-04-14"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (2006, 9)
    assert response.usage.cache_read_tokens == 1920
    assert response.tool_calls == []


@pytest.mark.parametrize("chunk", [0, 5])
def test_openai_parallel_tool_calls_with_interleaved_argument_fragments(chunk):
    texts, response = replay(openai, recording("openai_tool_calls.sse"), chunk=chunk)
    assert texts == []
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_read", "read_file", {"path": "textkit/slug.py"}),
        ("call_search", "search", {"pattern": "def slugify"}),
    ]
    assert response.finish_reason == "tool_calls"
    assert response.usage.cache_read_tokens == 1280  # from the `choices: []` usage chunk


def test_openai_error_chunk_after_http_200_raises_a_typed_retryable_error():
    with pytest.raises(LLMStatusError) as info:
        replay(openai, recording("openai_error_after_200.sse"))
    assert info.value.status_code == 500
    assert info.value.retryable
    assert "server had an error" in str(info.value)


def test_openai_rate_limit_code_in_error_chunk_maps_to_rate_limit_error():
    data = b'data: {"error": {"message": "slow down", "code": "rate_limit_exceeded"}}\n\n'
    with pytest.raises(RateLimitError):
        replay(openai, data)


def test_openai_stream_cut_mid_answer_is_a_connection_error_not_a_half_answer():
    data = recording("openai_text.sse")
    cut = data[: data.index(b"is done")]
    with pytest.raises(LLMConnectionError, match="ended before the model finished"):
        replay(openai, cut, require_done=False)


def test_openai_stream_without_done_marker_is_complete_after_a_finish_reason():
    data = recording("openai_text.sse").replace(b"data: [DONE]\n\n", b"")
    _, response = replay(openai, data, require_done=False)
    assert response.content.endswith("is done.")


def test_openai_finish_reason_spellings_are_normalized():
    assert openai.normalize_finish_reason("function_call") == "tool_calls"
    assert openai.normalize_finish_reason("eos") == "stop"
    assert openai.normalize_finish_reason("length") == "length"
    assert openai.normalize_finish_reason("something_new") == "something_new"


def test_openai_tool_call_without_index_or_id_accumulates_with_a_marked_made_up_id(caplog):
    chunks = [
        {"choices": [{"delta": {"tool_calls": [{"function": {"name": "think"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": '{"thought": '}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": '"x"}'}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    ]
    snapshot = StreamSnapshot()
    for chunk in chunks:
        openai.accumulate(ServerSentEvent(json.dumps(chunk)), snapshot)
    with caplog.at_level(logging.DEBUG, logger="apps.engine.llm.sse"):
        (call,) = snapshot.finish(require_done=False).tool_calls
    assert (call.name, call.arguments) == ("think", {"thought": "x"})
    assert call.synthetic_id and call.id.startswith(SYNTHETIC_ID_PREFIX) and call.id.endswith("_0")
    assert f"using {call.id}" in caplog.text


def test_made_up_ids_differ_between_answers_and_real_ids_are_not_marked():
    first = openai.parse_response(NO_ID_ANSWER)
    second = openai.parse_response(NO_ID_ANSWER)
    assert first.tool_calls[0].synthetic_id and second.tool_calls[0].synthetic_id
    assert first.tool_calls[0].id != second.tool_calls[0].id
    with_id = json.loads(json.dumps(NO_ID_ANSWER))
    with_id["choices"][0]["message"]["tool_calls"][0]["id"] = "call_real"
    (call,) = openai.parse_response(with_id).tool_calls
    assert (call.id, call.synthetic_id) == ("call_real", False)


NO_ID_ANSWER = {
    "choices": [
        {
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"type": "function", "function": {"name": "think", "arguments": "{}"}}
                ],
            },
            "finish_reason": "tool_calls",
        }
    ]
}


def test_invalid_tool_arguments_are_kept_with_a_readable_error():
    data = (
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1",'
        b'"function":{"name":"shell","arguments":"{\\"command\\": \\"ls"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    _, response = replay(openai, data)
    (call,) = response.tool_calls
    assert call.arguments == {}
    assert call.raw_arguments == '{"command": "ls'
    assert "not valid JSON" in call.arguments_error


@pytest.mark.parametrize("chunk", [0, 1, 64])
def test_anthropic_stream_with_thinking_ping_unknown_event_and_two_tool_uses(chunk):
    texts, response = replay(anthropic, recording("anthropic_tool_use.sse"), chunk=chunk)
    assert "".join(texts) == response.content == "Let me read the function."
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("toolu_01A", "read_file", {"path": "textkit/slug.py", "symbol": "slugify"}),
        ("toolu_01B", "think", {"thought": "runs of separators"}),
    ]
    assert response.finish_reason == "tool_calls"
    usage = response.usage
    # Anthropic's input_tokens excludes cached tokens; the neutral figure includes them.
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        12 + 2048 + 300,
        2048,
        300,
    )
    assert usage.output_tokens == 87


def test_anthropic_error_event_after_http_200_raises_overloaded_as_retryable_status():
    with pytest.raises(LLMStatusError) as info:
        replay(anthropic, recording("anthropic_error_after_200.sse"))
    assert info.value.status_code == 529
    assert info.value.retryable
    assert "Overloaded" in str(info.value)


def test_anthropic_stream_cut_before_message_stop_is_a_connection_error():
    data = recording("anthropic_tool_use.sse")
    cut = data[: data.index(b"event: message_stop")]  # message_delta arrived, stop did not
    with pytest.raises(LLMConnectionError):
        replay(anthropic, cut)


def test_anthropic_stream_cut_inside_tool_json_is_a_connection_error():
    data = recording("anthropic_tool_use.sse")
    cut = data[: data.index(b"it/slug.py") + 3]
    with pytest.raises(LLMConnectionError):
        replay(anthropic, cut)


@pytest.mark.parametrize("chunk", [0, 1, 48])
def test_anthropic_server_side_tools_make_no_phantom_calls_and_keep_the_real_one(chunk):
    texts, response = replay(anthropic, recording("anthropic_server_tools.sse"), chunk=chunk)
    (call,) = response.tool_calls  # web_search and code_execution ran on Anthropic's side
    assert (call.id, call.name, call.synthetic_id) == ("toolu_01RealRead", "read_file", False)
    assert call.arguments == {"path": "textkit/slug.py", "symbol": "slugify"}
    assert call.arguments_error is None
    assert (
        response.content
        == "".join(texts)
        == (
            "I'll check the latest release notes.Version 2.0 renames the separator argument, "
            "so I will read our slugify."
        )
    )
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (10682, 510)


def test_anthropic_server_tool_request_counts_are_kept_with_the_raw_usage():
    snapshot = StreamSnapshot()
    for event in decode_all([recording("anthropic_server_tools.sse")]):
        anthropic.accumulate(event, snapshot)
    assert snapshot.raw_usage["server_tool_use"] == {
        "web_search_requests": 1,
        "code_execution_requests": 1,
    }


def test_anthropic_json_answer_with_server_tool_blocks_has_only_the_real_call():
    data = {
        "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "server_tool_use": {"web_search_requests": 1},
        },
        "content": [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {"query": "x"},
            },
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "text", "text": "Found it.", "citations": []},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "a.py"}},
        ],
    }
    (call,) = anthropic.parse_response(data).tool_calls
    assert (call.id, call.name, call.arguments) == ("toolu_2", "read_file", {"path": "a.py"})


GROQ_TOOL_USE_FAILED = {
    "message": "Failed to call a function. Please adjust your prompt.",
    "type": "invalid_request_error",
    "code": "tool_use_failed",
    "failed_generation": '<function=read_file{"path": "a.py"}</function>',
}


@pytest.mark.parametrize(
    ("error", "status", "cls", "retryable"),
    [
        (GROQ_TOOL_USE_FAILED, 400, LLMStatusError, False),
        (
            {"message": "slow down", "type": "tokens", "code": "rate_limit_exceeded"},
            429,
            RateLimitError,
            True,
        ),
        ({"message": "slow down", "type": "rate_limit_error"}, 429, RateLimitError, True),
        (
            {"message": "The server had an error", "type": "server_error", "code": None},
            500,
            LLMStatusError,
            True,
        ),
        ({"message": "bad key", "type": "authentication_error"}, 401, AuthenticationError, False),
        ({"message": "busy", "code": 503}, 503, LLMStatusError, True),
        ({"message": "something new"}, 500, LLMStatusError, True),
    ],
)
def test_openai_error_chunk_is_classified_by_status_code_and_type(error, status, cls, retryable):
    with pytest.raises(LLMStatusError) as info:
        openai.accumulate(ServerSentEvent(json.dumps({"error": error})), StreamSnapshot())
    assert type(info.value) is cls
    assert (info.value.status_code, info.value.retryable) == (status, retryable)


def test_anthropic_error_event_is_classified_by_its_type():
    event = ServerSentEvent(
        json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}),
        event="error",
    )
    with pytest.raises(LLMStatusError) as info:
        anthropic.accumulate(event, StreamSnapshot())
    assert (info.value.status_code, info.value.retryable) == (400, False)
