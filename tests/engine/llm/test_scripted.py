"""The scripted provider: a deterministic offline model that plays a script, in process."""

from __future__ import annotations

import textwrap

import pytest

from apps.engine.config import load_config, parse_config
from apps.engine.llm import (
    ChatRequest,
    Gateway,
    LLMConfigurationError,
    LLMError,
    Message,
    RateLimitError,
    ScriptedProvider,
    ScriptExhaustedError,
    TextBlock,
    ToolCall,
)
from tests.engine.llm.conftest import TOOLS, ask, long_system


async def stream_all(gateway: Gateway, request: ChatRequest):
    return [delta async for delta in gateway.stream(request)]


async def test_turns_without_conditions_answer_calls_in_order():
    gateway = Gateway.for_script(["first", "second"])
    assert (await gateway.complete(ask())).content == "first"
    assert (await gateway.complete(ask())).content == "second"
    assert len(gateway.provider("main").requests) == 2


async def test_running_out_of_script_says_which_call_what_was_asked_and_how_to_extend():
    gateway = Gateway.for_script(["only one"])
    await gateway.complete(ask())
    with pytest.raises(ScriptExhaustedError) as info:
        await gateway.complete(ask("and another thing?"))
    message = str(info.value)
    assert isinstance(info.value, LLMError)
    assert "ran out of script at call 2" in message
    assert "'and another thing?'" in message
    assert "turn 1 (says 'only one'): already used" in message
    assert "repeat: true" in message


async def test_stream_comes_in_chunks_that_add_up_to_the_answer_with_usage():
    gateway = Gateway.for_script(["Offline models stream too, word by word."])
    deltas = await stream_all(gateway, ask())
    *texts, last = deltas
    assert len(texts) == 7
    assert "".join(d.text for d in texts) == last.response.content
    usage = last.response.usage
    assert usage.input_tokens > 0 and usage.output_tokens == 10  # 40 characters
    assert (last.response.alias, last.response.model) == ("main", "scripted-demo")


async def test_tool_call_turn_returns_tool_calls_with_ids_and_raw_arguments():
    gateway = Gateway.for_script(
        [{"tool_calls": [{"name": "shell", "arguments": {"command": "ls", "timeout": 5}}]}]
    )
    response = await gateway.complete(ask())
    (call,) = response.tool_calls
    assert (call.id, call.name, call.arguments) == (
        "call_1_0",
        "shell",
        {"command": "ls", "timeout": 5},
    )
    assert call.raw_arguments == '{"command": "ls", "timeout": 5}'
    assert response.finish_reason == "tool_calls" and response.content == ""


async def test_match_and_repeat_choose_turns_by_the_message_being_answered():
    gateway = Gateway.for_script(
        [
            {"match": "(?i)weather", "text": "Sunny.", "repeat": True},
            {"match": "(?i)time", "text": "Noon.", "repeat": True},
        ]
    )
    answers = [(await gateway.complete(ask(q))).content for q in ["TIME?", "weather?", "time?"]]
    assert answers == ["Noon.", "Sunny.", "Noon."]
    with pytest.raises(ScriptExhaustedError, match="match '\\(\\?i\\)weather' not found"):
        await gateway.complete(ask("hello"))


async def test_after_tool_matches_the_tool_result_by_its_call_id():
    script = [
        {"after_tool": "read_file", "tool_error": True, "text": "The read failed."},
        {"after_tool": "read_file", "text": "Read it."},
    ]
    call = ToolCall("c1", "read_file", {"path": "x"})

    def after(result: str, is_error: bool) -> ChatRequest:
        return ChatRequest(
            messages=(
                Message("user", "read x"),
                Message("assistant", "", (call,)),
                Message("tool", result, tool_call_id="c1", is_error=is_error),  # no name
            )
        )

    gateway = Gateway.for_script(script)
    assert (await gateway.complete(after("contents", False))).content == "Read it."
    assert (await gateway.complete(after("no such file", True))).content == "The read failed."


async def test_only_if_offered_skips_tool_turns_when_the_tool_is_not_offered():
    script = [
        {
            "only_if_offered": True,
            "tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}],
        },
        {"text": "No tools here, so I just answer.", "repeat": True},
    ]
    gateway = Gateway.for_script(script)
    assert (await gateway.complete(ask())).content.startswith("No tools here")
    assert (await gateway.complete(ask(tools=TOOLS))).tool_calls[0].name == "read_file"


async def test_fail_turn_raises_the_typed_error_and_the_gateway_retries_to_the_next_turn():
    waits = []

    async def no_wait(seconds):
        waits.append(seconds)

    gateway = Gateway.for_script([{"fail": "rate_limit"}, "recovered"], sleep=no_wait)
    response = await gateway.complete(ask())
    assert (response.content, response.attempts, waits) == ("recovered", 2, [0.0])
    direct = ScriptedProvider([{"fail": "rate_limit"}])
    with pytest.raises(RateLimitError):
        async for _ in direct.generate(ask(), stream=False):
            pass


async def test_text_then_connection_failure_streams_then_restarts_on_the_retry():
    gateway = Gateway.for_script(
        [{"text": "half an answer", "fail": "connection"}, "whole answer"], sleep=_no_sleep
    )
    deltas = await stream_all(gateway, ask())
    assert [d.text for d in deltas[:3]] == ["half ", "an ", "answer"]
    assert deltas[3].restart
    assert deltas[-1].response.content == "whole answer"


async def _no_sleep(_seconds):
    return None


async def test_empty_fail_is_an_empty_answer_that_the_gateway_rejects():
    gateway = Gateway.for_script([{"fail": "empty"}, "fine"], sleep=_no_sleep)
    assert (await gateway.complete(ask())).content == "fine"


async def test_repeated_cached_system_prompt_reads_from_the_simulated_cache():
    gateway = Gateway.for_script([{"text": "ok", "repeat": True}])
    first = await gateway.complete(ask("one", system=long_system()))
    second = await gateway.complete(ask("two", system=long_system()))
    assert first.usage.cache_write_tokens > 0 and first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens >= first.usage.cache_write_tokens - 10
    no_cache = await gateway.complete(ask("three", system=(TextBlock("x" * 8000),)))
    assert no_cache.usage.cache_read_tokens == no_cache.usage.cache_write_tokens == 0


def test_invalid_script_is_a_configuration_error_naming_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "- text: fine\n- tool_calls: [{arguments: {}}]\n- match: '(unclosed'\n  text: x\n"
    )
    with pytest.raises(LLMConfigurationError) as info:
        ScriptedProvider(path)
    message = str(info.value)
    assert str(path) in message
    assert "turns.1.tool_calls.0.name: Field required" in message
    assert "turns.2.match: invalid regular expression" in message


def test_turn_without_anything_to_say_is_refused():
    with pytest.raises(LLMConfigurationError, match="use `fail: empty`"):
        ScriptedProvider([{"match": "x"}])


async def test_config_script_path_resolves_against_the_config_folder(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "mine.yaml").write_text(
        textwrap.dedent(
            """
            description: a test script
            turns:
              - text: from my own script
                repeat: true
            """
        )
    )
    (tmp_path / "agentkit.yaml").write_text(
        "models:\n  main:\n    provider: scripted\n    script: scripts/mine.yaml\n"
    )
    async with Gateway(load_config(tmp_path / "agentkit.yaml")) as gateway:
        assert (await gateway.complete(ask())).content == "from my own script"


async def test_for_script_replaces_one_alias_and_keeps_the_rest_of_the_config():
    config = parse_config(
        {
            "models": {"main": {"provider": "scripted"}, "fast": {"provider": "scripted"}},
            "llm": {"auxiliary_model": "fast"},
        }
    )
    gateway = Gateway.for_script(["summary"], config=config, alias="fast")
    assert gateway.auxiliary_alias == "fast"
    assert (await gateway.complete(ask(), model="fast")).content == "summary"
    assert "offline scripted model" in (await gateway.complete(ask("hello"))).content
