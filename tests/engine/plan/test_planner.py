"""The planner (apps/engine/plan/planner.py): structured output validated with pydantic; an invalid
reply goes back with its validation errors, a bounded number of times, then `invalid_spec`."""

from __future__ import annotations

import json

import pytest

from apps.engine.llm.gateway import Gateway
from apps.engine.plan.planner import PLAN_REQUEST, Planner, PlannerFailed
from apps.engine.plan.spec import SpecDraft

VALID = {
    "goal": "add a CLI",
    "phases": [
        {"id": "design", "title": "Design the flags", "role": "planner"},
        {"id": "build", "title": "Write it", "depends_on": ["design"]},
    ],
    "verification_commands": ["pytest -q"],
}
CYCLE = {**VALID, "phases": [{"id": "a", "title": "A", "depends_on": ["a"]}]}


async def test_a_valid_reply_becomes_a_spec_draft_with_usage_counted():
    gateway = Gateway.for_script([{"text": "```json\n" + json.dumps(VALID) + "\n```"}])
    result = await Planner(gateway).draft("add a CLI", pitfalls="- read cli.py first")
    assert isinstance(result.draft, SpecDraft) and result.attempts == 1
    assert [p.id for p in result.draft.phases] == ["design", "build"]
    assert result.llm_calls == 1 and result.usage.output_tokens > 0
    request = gateway.provider("main").requests[0]
    text = request.messages[0].content
    assert text.startswith(PLAN_REQUEST) and "read cli.py first" in text
    assert request.tools == ()  # structured output: no tools offered


async def test_an_invalid_reply_is_sent_back_with_its_errors_then_the_valid_one_is_used():
    gateway = Gateway.for_script(
        [
            {"text": "Here is my plan: first design, then build."},
            {"text": json.dumps(CYCLE)},
            {"match": "That spec is invalid", "text": json.dumps(VALID)},
        ]
    )
    result = await Planner(gateway, max_attempts=3).draft("add a CLI")
    assert result.attempts == 3 and result.llm_calls == 3
    requests = gateway.provider("main").requests
    assert "contains no JSON object" in requests[1].messages[-1].content
    assert "depends on itself" in requests[2].messages[-1].content
    assert requests[2].messages[-2].role == "assistant"  # the invalid reply, for context


async def test_no_valid_reply_within_the_attempts_is_a_clear_invalid_spec_failure():
    gateway = Gateway.for_script(
        [{"text": json.dumps({"goal": "x", "phases": []}), "repeat": True}]
    )
    with pytest.raises(PlannerFailed) as failed:
        await Planner(gateway, max_attempts=2).draft("x")
    error = failed.value.error
    assert error.error_code == "invalid_spec" and "2 attempt" in error.message
    assert "phases" in error.message and any("planner.max_attempts" in s for s in error.suggestions)
    assert len(gateway.provider("main").requests) == 2


async def test_a_revision_is_asked_with_the_rejected_spec_and_the_feedback():
    gateway = Gateway.for_script([{"text": json.dumps(VALID)}])
    previous = SpecDraft.model_validate(VALID)
    await Planner(gateway, roles=["reviewer", "coder"]).draft(
        "add a CLI", mode="team_collab", previous=previous, feedback="add a --json flag"
    )
    text = gateway.provider("main").requests[0].messages[0].content
    assert "Mode: team_collab" in text and "Roles you may assign: coder, reviewer" in text
    assert '"design"' in text and "Reviewer feedback" in text and "--json flag" in text


async def test_the_demo_script_plans_plan_and_team_goals_and_their_revisions():
    from apps.engine.llm.providers.script import DEMO_SCRIPT

    gateway = Gateway.for_script(DEMO_SCRIPT)
    goal = "fix the failing test in tests/test_slug.py"
    plan = (await Planner(gateway).draft(goal)).draft
    assert [p.id for p in plan.phases] == ["read", "fix"]
    revised = (await Planner(gateway).draft(goal, previous=plan, feedback="run ruff too")).draft
    assert "ruff check passes" in revised.acceptance_criteria
    team = (await Planner(gateway).draft(goal, mode="team_collab")).draft
    assert {p.role for p in team.phases} == {"planner", "coder", "reviewer"}
    assert team.phase("fix").rollback_command == "@snapshot"
    other = (await Planner(gateway).draft("hello there")).draft
    assert "offline" in other.summary


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_planner_over_http_re_asks_with_the_errors_and_accepts_the_fix(provider):
    from apps.engine.config import parse_config
    from tests.engine.helpers import no_sleep
    from tests.fakes.llm_server import FakeLLMServer

    script = [
        {"match": "^Plan this task", "text": json.dumps(CYCLE)},
        {"match": "That spec is invalid", "text": json.dumps(VALID)},
    ]
    with FakeLLMServer(script) as server:
        cfg = parse_config({"models": {"main": server.model_entry(provider)}})
        async with Gateway(cfg, sleep=no_sleep) as gateway:
            result = await Planner(gateway).draft("add a CLI")
        bodies = [r.body for r in server.requests]
    assert result.attempts == 2 and result.draft.phase("build").depends_on == ["design"]
    assert len(bodies) == 2 and "depends on itself" in json.dumps(bodies[1])
    # structured output as each provider has it (test_planner_structured_http.py for more)
    if provider == "openai":
        assert bodies[0]["response_format"]["type"] == "json_schema"
        assert "tools" not in bodies[0]
    else:
        assert bodies[0]["tool_choice"] == {"name": "submit_spec", "type": "tool"}
        assert [tool["name"] for tool in bodies[0]["tools"]] == ["submit_spec"]
