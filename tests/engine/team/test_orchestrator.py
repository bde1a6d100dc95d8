"""TeamOrchestrator (team_collab, seed 000 U9 / R7): experts run the spec's phases in dependency
order, independent phases concurrently within team.max_concurrency, one task_started /
task_finished and one hook for the whole task, failures surfaced (never a react fallback),
dependents of a failed phase never run, unknown templates and roles refused with the known ones,
checkpoints saved per phase and used to resume without redoing finished phases."""

from __future__ import annotations

import pytest

from apps.engine.ports import PhaseCheckpoint
from tests.engine.helpers import HookRecorder, of_type, types
from tests.engine.team_support import (
    MemoryCheckpoints,
    Probe,
    answer,
    asked_phases,
    phase,
    run_team,
    spec,
    team,
)

pytestmark = pytest.mark.asyncio

THREE = spec(
    phase("plan", "planner"),
    phase("build", "coder", ["plan"]),
    phase("review", "reviewer", ["build"]),
)


async def test_phases_run_in_dependency_order_by_their_experts_in_one_task_lifecycle():
    hooks = HookRecorder()
    orchestrator, provider = team(
        [answer("review"), answer("build"), answer("plan", "Plan: change app.py")], hooks=hooks
    )
    events = await run_team(orchestrator, THREE)

    assert types(events).count("task_started") == 1
    assert types(events).count("task_finished") == 1
    assert events[0].data["mode"] == "team_collab"
    started = [e.data["phase_id"] for e in of_type(events, "phase_started")]
    assert started == ["plan", "build", "review"]
    assert [e.data["role"] for e in of_type(events, "phase_started")] == [
        "planner",
        "coder",
        "reviewer",
    ]
    assert [e.data["phase_id"] for e in of_type(events, "phase_completed")] == started
    # each phase was run by its expert: the expert's system prompt went to the model
    systems = ["".join(b.text for b in r.system) for r in provider.requests]
    assert "You are the planner." in systems[0] and "You are the reviewer." in systems[2]
    # a dependency's result reaches the phase that depends on it
    assert "Plan: change app.py" in provider.requests[1].messages[-1].content
    finished = events[-1]
    assert finished.type == "task_finished" and finished.data["status"] == "completed"
    assert finished.data["usage"]["llm_calls"] == 3
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert hooks.names == ["on_task_complete"]


async def test_forwarded_events_carry_their_phase():
    orchestrator, _ = team([answer("plan"), answer("build"), answer("review")])
    events = await run_team(orchestrator, THREE)
    answers = of_type(events, "final_answer")
    assert [e.data["phase_id"] for e in answers] == ["plan", "build", "review"]


async def test_independent_phases_run_concurrently_within_max_concurrency():
    probe = Probe()
    turns = [
        {
            "match": "Your phase",
            "role": "user",
            "repeat": True,
            "tool_calls": [{"name": "probe", "arguments": {}}],
        },
        {"after_tool": "probe", "repeat": True, "text": "piece done."},
    ]
    four = spec(*(phase(f"p{i}") for i in range(4)))
    orchestrator, _ = team(turns, tools=[probe], team={"max_concurrency": 2})
    events = await run_team(orchestrator, four)
    assert events[-1].data["status"] == "completed"
    assert probe.most == 2  # concurrent, and never more than the bound

    probe_one = Probe()
    orchestrator, _ = team(turns, tools=[probe_one], team={"max_concurrency": 1})
    await run_team(orchestrator, four)
    assert probe_one.most == 1


async def test_failed_phase_fails_its_dependents_which_never_run_and_the_task_fails():
    hooks = HookRecorder()
    turns = [
        answer("plan"),
        {"match": "Your phase, as the coder: build ", "fail": "auth"},
        answer("side"),
    ]
    work = spec(
        phase("plan", "planner"),
        phase("build", "coder", ["plan"]),
        phase("review", "reviewer", ["build"]),
        phase("docs", "coder", ["review"]),
        phase("side", "coder"),
    )
    orchestrator, provider = team(turns, hooks=hooks)
    events = await run_team(orchestrator, work)

    failed = {e.data["phase_id"]: e.data for e in of_type(events, "phase_failed")}
    assert set(failed) == {"build", "review", "docs"}
    assert (
        failed["review"]["status"] == "skipped" and failed["review"]["failed_dependency"] == "build"
    )
    assert failed["docs"]["error_struct"]["error_code"] == "dependency_failed"
    assert "review" not in asked_phases(provider) and "docs" not in asked_phases(provider)
    assert "side" in asked_phases(provider)  # independent of the failure: it still ran
    finished = events[-1]
    assert finished.data["status"] == "failed"
    error = finished.data["error"]
    assert error["error_code"] == "phase_failed"
    assert "build (coder)" in error["message"] and "review, docs" in error["message"]
    assert of_type(events, "error")[-1].data["fatal"] is True
    assert types(events).count("task_finished") == 1
    assert hooks.names == ["on_task_failed"]


async def test_a_failing_team_never_falls_back_to_a_single_react_agent():
    turns = [{"match": "Your phase", "fail": "auth", "repeat": True}]
    work = spec(phase("a"), phase("b"))
    orchestrator, provider = team(turns)
    events = await run_team(orchestrator, work)
    assert events[-1].data["status"] == "failed"
    # every model call was a phase's: no extra single-agent attempt at the whole goal
    assert asked_phases(provider) and "?" not in asked_phases(provider)
    assert {e.data["mode"] for e in of_type(events, "task_started")} == {"team_collab"}


async def test_unknown_team_template_is_refused_listing_the_known_ones():
    hooks = HookRecorder()
    orchestrator, provider = team(
        [answer("plan")],
        template="frontend",
        hooks=hooks,
        team={"templates": {"solo": {"experts": ["coder"]}}},
    )
    events = await run_team(orchestrator, spec(phase("plan")))
    error = events[-1].data["error"]
    assert events[-1].data["status"] == "failed"
    assert error["error_code"] == "unknown_team_template"
    assert "'frontend'" in error["message"] and "default, solo" in error["message"]
    assert provider.requests == []  # nothing ran
    assert hooks.names == ["on_task_failed"]


async def test_phase_for_an_expert_outside_the_template_is_refused_before_anything_runs():
    orchestrator, provider = team(
        [answer("plan")], template="solo", team={"templates": {"solo": {"experts": ["coder"]}}}
    )
    events = await run_team(orchestrator, spec(phase("plan", "planner")))
    error = events[-1].data["error"]
    assert error["error_code"] == "unknown_expert"
    assert "'planner'" in error["message"] and "coder" in error["message"]
    assert provider.requests == []


async def test_each_completed_phase_is_checkpointed_with_its_counters():
    store = MemoryCheckpoints()
    orchestrator, _ = team([answer("plan"), answer("build"), answer("review")], checkpoints=store)
    await run_team(orchestrator, THREE)
    assert [(c.phase_id, c.status) for c in store.saved] == [
        ("plan", "completed"),
        ("build", "completed"),
        ("review", "completed"),
    ]
    assert store.saved[0].counters["final"] == "plan is done."
    # each expert's phased run starts in its own plan_exec phase (config/team.py)
    assert [c.counters["phases"]["phase"] for c in store.saved] == [
        "planning",
        "building",
        "verification",
    ]
    assert store.saved[0].counters["usage"]["llm_calls"] == 1


async def test_resume_from_checkpoints_does_not_redo_finished_phases():
    saved = [
        PhaseCheckpoint(
            "plan",
            "completed",
            {"final": "Plan: edit app.py", "steps": 1, "usage": {"llm_calls": 1}, "cost": 0.0},
        )
    ]
    store = MemoryCheckpoints(saved)
    orchestrator, provider = team([answer("build"), answer("review")], checkpoints=store)
    events = await run_team(orchestrator, THREE)
    assert asked_phases(provider) == ["build", "review"]
    assert of_type(events, "phase_completed")[0].data["resumed"] is True
    assert "Plan: edit app.py" in provider.requests[0].messages[-1].content
    assert events[-1].data["status"] == "completed"
    assert events[-1].data["usage"]["llm_calls"] == 3  # the resumed phase's usage counts


async def test_cancelling_the_task_cancels_the_running_phases_and_fires_one_hook():
    import asyncio

    from apps.engine.loop.cancellation import CancellationToken

    hooks = HookRecorder()
    probe = Probe()
    turns = [
        {
            "match": "Your phase",
            "role": "user",
            "repeat": True,
            "tool_calls": [{"name": "probe", "arguments": {}}],
        },
        {"after_tool": "probe", "repeat": True, "text": "piece done."},
    ]
    orchestrator, _ = team(turns, tools=[probe], hooks=hooks)
    token = CancellationToken()
    asyncio.get_running_loop().call_later(0.1, token.cancel, "stop")
    events = await run_team(
        orchestrator, spec(phase("a"), phase("b", depends_on=["a"])), cancel=token
    )
    assert events[-1].data["status"] == "cancelled"
    assert "b" not in {e.data["phase_id"] for e in of_type(events, "phase_started")}
    assert hooks.names == ["on_task_cancelled"]
