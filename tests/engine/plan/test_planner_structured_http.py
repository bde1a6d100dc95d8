"""The planner on real models' structured output, through the fake LLM server (issue 28):
OpenAI `response_format: json_schema` (strict), a forced `submit_spec` tool call (Anthropic, and
OpenAI-compatible servers with `structured_output: tool`), the words of the prompt when the
server refuses json_schema; validate-and-ask-again behind all of them, `invalid_spec` at the end.
"""

from __future__ import annotations

import json

import pytest

from apps.engine.config import parse_config
from apps.engine.llm.gateway import Gateway
from apps.engine.llm.structured import strict_schema
from apps.engine.plan.planner import SPEC_TOOL, Planner, PlannerFailed
from apps.engine.plan.spec import SpecDraft
from tests.engine.helpers import no_sleep
from tests.fakes.llm_server import FakeLLMServer

VALID = {
    "goal": "add a CLI",
    "summary": "flags, then the entry point",
    "phases": [
        {
            "id": "design",
            "title": "Design the flags",
            "role": "coder",
            "instructions": "",
            "depends_on": [],
            "validation_command": None,
            "rollback_command": None,
        },
        {
            "id": "build",
            "title": "Write it",
            "role": "coder",
            "instructions": "cli.py",
            "depends_on": ["design"],
            "validation_command": "pytest -q",
            "rollback_command": None,
        },
    ],
    "verification_commands": ["pytest -q"],
    "acceptance_criteria": ["--help works"],
}
CYCLE = {**VALID, "phases": [{**VALID["phases"][0], "depends_on": ["design"]}]}


def config(server: FakeLLMServer, provider: str, **model) -> object:
    return parse_config(
        {
            "models": {"main": server.model_entry(provider, **model)},
            "llm": {"retries": {"max_attempts": 1}},
        }
    )


async def plan(cfg, **kwargs):
    async with Gateway(cfg, sleep=no_sleep) as gateway:
        return await Planner(gateway, **kwargs).draft("add a CLI")


def walk(schema):
    yield schema
    if isinstance(schema, dict):
        for value in schema.values():
            yield from walk(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from walk(item)


def keywords(node: dict) -> set[str]:
    """The JSON Schema keywords a schema uses, at any depth."""
    found = set(node)
    for sub in (node.get("properties") or {}).values():
        found |= keywords(sub)
    for sub in [node["items"]] if "items" in node else []:
        found |= keywords(sub)
    for sub in node.get("anyOf") or []:
        found |= keywords(sub)
    return found


def test_the_spec_schema_is_strict_and_portable():
    schema = strict_schema(SpecDraft.model_json_schema())
    objects = [node for node in walk(schema) if isinstance(node, dict) and "properties" in node]
    assert len(objects) == 2  # the spec and its phase, the $ref inlined
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == sorted(node["properties"])
        assert list(node) == sorted(node)  # sorted keys: the same bytes every request
    assert keywords(schema) == {
        "additionalProperties",
        "anyOf",
        "items",
        "properties",
        "required",
        "type",
    }  # no $defs, $ref, title, default, lengths or patterns
    assert strict_schema(SpecDraft.model_json_schema()) == schema


async def test_openai_gets_a_strict_json_schema_and_its_answer_is_the_spec():
    with FakeLLMServer([json.dumps(VALID)]) as server:
        result = await plan(config(server, "openai"))
        (body,) = [r.body for r in server.requests]
    assert result.attempts == 1 and [p.id for p in result.draft.phases] == ["design", "build"]
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == SPEC_TOOL
    assert response_format["json_schema"]["strict"] is True
    assert response_format["json_schema"]["schema"] == strict_schema(SpecDraft.model_json_schema())
    assert "tool_choice" not in body and "tools" not in body


async def test_an_openai_compatible_server_without_json_schema_gets_a_forced_tool_call():
    script = [
        {"match": "^Plan this task", "text": json.dumps(CYCLE)},
        {"match": "That spec is invalid", "text": json.dumps(VALID)},
    ]
    with FakeLLMServer(script, json_schema_supported=False) as server:
        result = await plan(config(server, "openai", structured_output="tool"))
        bodies = [r.body for r in server.requests]
    assert result.attempts == 2 and result.draft.phase("build").depends_on == ["design"]
    first, second = bodies
    assert first["tool_choice"] == {"function": {"name": SPEC_TOOL}, "type": "function"}
    assert [tool["function"]["name"] for tool in first["tools"]] == [SPEC_TOOL]
    assert "response_format" not in first
    # The invalid call is answered by its tool result carrying the validation errors.
    assistant, tool = second["messages"][-2:]
    assert assistant["tool_calls"][0]["function"]["name"] == SPEC_TOOL
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == CYCLE
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert "depends on itself" in tool["content"]


async def test_a_server_that_refuses_json_schema_is_asked_again_in_words():
    with FakeLLMServer([json.dumps(VALID)], json_schema_supported=False) as server:
        result = await plan(config(server, "openai"))
        bodies = [r.body for r in server.requests]
    assert result.attempts == 1 and result.draft.goal == "add a CLI"
    assert [("response_format" in body) for body in bodies] == [True, False]


async def test_anthropic_gets_a_forced_tool_call_without_thinking():
    script = [
        {"match": "^Plan this task", "text": json.dumps(CYCLE)},
        {"match": "That spec is invalid", "text": json.dumps(VALID)},
    ]
    with FakeLLMServer(script) as server:
        cfg = config(server, "anthropic", max_tokens=8192, thinking_budget=2048)
        result = await plan(cfg)
        bodies = [r.body for r in server.requests]
    assert result.attempts == 2 and len(result.draft.phases) == 2
    for body in bodies:
        assert body["tool_choice"] == {"name": SPEC_TOOL, "type": "tool"}
        assert "thinking" not in body  # the API refuses thinking with a forced tool
    (tool,) = bodies[0]["tools"]
    assert tool["input_schema"] == strict_schema(SpecDraft.model_json_schema())
    assistant, results = bodies[1]["messages"][-2:]
    assert assistant["content"][-1]["type"] == "tool_use"
    assert assistant["content"][-1]["input"] == CYCLE
    (result_block,) = results["content"]
    assert result_block["type"] == "tool_result" and result_block["is_error"] is True
    assert "depends on itself" in result_block["content"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_model_that_never_gives_a_valid_spec_ends_in_invalid_spec(provider):
    script = [{"text": "I think we should first look at the code.", "repeat": True}]
    with FakeLLMServer(script) as server:
        cfg = config(server, provider, structured_output="tool")
        with pytest.raises(PlannerFailed) as info:
            await plan(cfg, max_attempts=3)
        requests = len(server.requests)
    assert requests == 3
    assert info.value.error.error_code == "invalid_spec"
    assert "3 attempt(s)" in info.value.error.message
    assert "no JSON object" in info.value.error.message


# ── the step-down on servers that refuse a way of asking (issue 38) ─────────────────────────
async def test_a_500_naming_response_format_steps_down_to_the_tool_without_retries():
    from apps.engine.llm.structured import forget_modes

    forget_modes()
    with FakeLLMServer(
        script=[{"text": json.dumps(VALID), "repeat": True}],
        json_schema_supported=False,
        json_schema_refusal_status=500,
    ) as server:
        cfg = parse_config(
            {
                "models": {"main": server.model_entry("openai")},
                "llm": {"retries": {"max_attempts": 3}},  # a capability error spends none
            }
        )
        result = await plan(cfg)
        assert result.draft.goal == "add a CLI" and result.attempts == 1
        first, second = server.requests
        assert "response_format" in first.body and "response_format" not in second.body
        assert second.body["tool_choice"]["function"]["name"] == SPEC_TOOL
        # remembered for the alias: the next plan asks by the tool at once
        await plan(cfg)
        assert len(server.requests) == 3 and "response_format" not in server.requests[2].body
    forget_modes()


async def test_a_server_refusing_the_tool_too_is_asked_in_words():
    from apps.engine.llm.structured import forget_modes

    forget_modes()
    with FakeLLMServer(
        script=[{"text": json.dumps(VALID), "repeat": True}],
        json_schema_supported=False,
        json_schema_refusal_status=500,
    ) as server:
        from tests.fakes.llm_server import Fault

        server.fail_next(
            Fault.http_error(500, "response_format is not supported"),
            Fault.http_error(500, "tool_choice is not supported by this server"),
        )
        cfg = parse_config(
            {
                "models": {"main": server.model_entry("openai")},
                "llm": {"retries": {"max_attempts": 3}},
            }
        )
        result = await plan(cfg)
        assert result.draft.goal == "add a CLI"
        bodies = [request.body for request in server.requests]
        assert len(bodies) == 3
        assert "response_format" in bodies[0] and "tool_choice" in bodies[1]
        assert "response_format" not in bodies[2] and "tool_choice" not in bodies[2]
    forget_modes()


async def test_the_planner_asks_for_a_low_temperature_where_the_alias_sets_none():
    with FakeLLMServer([{"text": json.dumps(VALID), "repeat": True}]) as server:
        await plan(config(server, "openai"), temperature=0.2)
        assert server.requests[-1].body["temperature"] == 0.2
        await plan(config(server, "openai", temperature=0.9), temperature=0.2)
        assert server.requests[-1].body["temperature"] == 0.9
