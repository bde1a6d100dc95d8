"""apps/engine/loop/resume.py: an interrupted plan_exec run's state (phase, budgets, conversation,
totals) rebuilt from its events, and a second run that goes on from it (ResumingPrelude) — in the
real engine with the scripted model and the real builtin tools."""

from __future__ import annotations

from contextlib import aclosing

from apps.engine.loop.resume import ResumingPrelude, phase_checkpoint, resume_point
from apps.engine.plan.phases import PhaseTracker
from apps.engine.ports import PhaseCheckpoint
from apps.engine.task import AgentTask
from tests.engine.helpers import config, of_type, types
from tests.engine.plan.conftest import workspace  # noqa: F401  (the fixture)
from tests.engine.plan.plan_exec_support import EDIT, call, engine_for, turn

TASK = AgentTask(task_id=1, goal="fix the failing test", mode="plan_exec")
FIRST = [
    turn(call("search", pattern="slugify")),  # step 1, planning
    turn(call("advance_phase")),  # step 2 -> building
    turn(EDIT),  # step 3, building
    turn(call("read_file", path="textkit/slug.py")),  # step 4: the process dies in it
]


async def interrupted_run(root, *, cut_after_calls: int = 4) -> list:
    """The events of a run whose process died while step 4's tool ran (its result never came)."""
    engine, _, _ = engine_for(FIRST, root)
    events = []
    async with aclosing(engine.run(TASK)) as stream:
        async for event in stream:
            events.append(event)
            if len(of_type(events, "tool_call")) == cut_after_calls:
                break
    return events


def stored(events) -> list[dict]:
    return [{"type": e.type, "data": e.data} for e in events]


async def test_the_resume_point_keeps_finished_steps_and_drops_the_one_in_flight(workspace):  # noqa: F811
    events = await interrupted_run(workspace)
    point = resume_point(stored(events))
    assert point.steps == 3
    roles = [m.role for m in point.messages]
    assert roles == ["assistant", "tool"] * 3
    assert [m.tool_calls[0].name for m in point.messages if m.role == "assistant"] == [
        "search",
        "advance_phase",
        "str_replace_editor",
    ]
    assert point.llm_calls == 3 and point.usage.output_tokens > 0
    tracker = point.tracker(PhaseTracker.for_run(config().plan_exec))
    assert (tracker.phase.value, tracker.step, tracker.steps_in_phase) == ("building", 3, 1)
    assert (tracker.think_used, tracker.verify_used) == (3, 0)


def test_no_finished_step_means_nothing_to_resume_from():
    assert resume_point([]) is None
    only_start = [
        {"type": "task_started", "data": {"mode": "plan_exec"}},
        {"type": "token", "data": {"step": 1, "text": "Let me"}},
        {"type": "tool_call", "data": {"step": 1, "call_id": "c1", "name": "search"}},
    ]
    assert resume_point(only_start) is None  # step 1's tool never answered


def test_a_step_a_dead_run_began_is_taken_again_by_the_next_run_not_mixed_with_it():
    def step(n, text, call_id, *, result=True, restart=False):
        rows = [{"type": "token", "data": {"step": n, "text": text}}]
        if restart:
            rows.append({"type": "token", "data": {"step": n, "text": "", "restart": True}})
            rows.append({"type": "token", "data": {"step": n, "text": "again "}})
        rows.append(
            {
                "type": "tool_call",
                "data": {"step": n, "call_id": call_id, "name": "think", "arguments": {}},
            }
        )
        if result:
            rows.append(
                {
                    "type": "tool_result",
                    "data": {"step": n, "call_id": call_id, "name": "think", "ok": True},
                }
            )
        return rows

    events = [
        {"type": "task_started", "data": {}},
        *step(1, "one ", "a"),
        *step(2, "dead ", "b", result=False),  # the first run died here
        {"type": "task_started", "data": {}},
        {"type": "task_resumed", "data": {"steps": 1}},
        *step(2, "two ", "c", restart=True),
    ]
    point = resume_point(events)
    assert point.steps == 2
    assert [m.content for m in point.messages if m.role == "assistant"] == ["one ", "again "]
    assert [m.tool_call_id for m in point.messages if m.role == "tool"] == ["a", "c"]


async def test_a_resumed_run_goes_on_from_the_conversation_phase_and_totals(workspace):  # noqa: F811
    point = resume_point(stored(await interrupted_run(workspace)))
    rest = [turn(call("advance_phase")), "Done: the separators collapse."]
    engine, model, _ = engine_for(rest, workspace)
    engine.prelude = ResumingPrelude(None, point)
    events = [e async for e in engine.run(TASK)]
    assert types(events)[:2] == ["task_started", "task_resumed"]
    resumed = events[1].data
    assert (resumed["phase"], resumed["steps"], resumed["restored_messages"]) == (
        "building",
        3,
        6,
    )
    first = model.requests[0]
    assert [m.role for m in first.messages] == ["user", *(["assistant", "tool"] * 3)]
    assert "slugify" in first.messages[2].content  # the search result the model saw
    changes = [(e.data["previous"], e.data["phase"]) for e in of_type(events, "phase_changed")]
    assert changes == [("building", "verification")]  # planning was not run again
    finished = events[-1].data
    assert (finished["status"], finished["steps"]) == ("completed", 5)
    assert finished["usage"]["llm_calls"] == 5 and finished["phases"]["step"] == 5
    assert [e.data["step"] for e in of_type(events, "tool_call")] == [4]


class Store:
    def __init__(self):
        self.saved: list[PhaseCheckpoint] = []

    async def save(self, checkpoint):
        self.saved.append(checkpoint)

    async def load(self):
        return list(self.saved)


class Confirmed:
    """A spec stage stand-in whose spec is confirmed at once."""

    def __init__(self):
        self.confirmed = None

    async def __call__(self, run, cancel):
        from types import SimpleNamespace

        self.confirmed = SimpleNamespace(spec_id=7, revision=2)
        return
        yield


async def test_a_new_run_checkpoints_its_confirmed_spec_and_a_resumed_one_does_not(workspace):  # noqa: F811
    store = Store()
    engine, _, _ = engine_for(["Done: nothing to change."], workspace)
    engine.prelude = ResumingPrelude(Confirmed(), None, store)
    events = [e async for e in engine.run(TASK)]
    assert "task_resumed" not in types(events)
    [spec] = store.saved
    assert (spec.phase_id, spec.status, spec.counters["spec_id"]) == ("spec", "completed", 7)
    assert spec.counters["phases"]["phase"] == "planning"

    point = resume_point(stored(await interrupted_run(workspace)))
    store = Store()
    engine, _, _ = engine_for([turn(call("advance_phase")), "Done."], workspace)
    engine.prelude = ResumingPrelude(Confirmed(), point, store)
    events = [e async for e in engine.run(TASK)]
    assert "task_resumed" in types(events) and store.saved == []


def test_a_phase_change_checkpoints_the_phase_it_leaves():
    counters = {"phase": "building", "step": 2}
    left = phase_checkpoint({"previous": "planning", "reason": "tool", "counters": counters})
    assert (left.phase_id, left.status, left.counters) == (
        "planning",
        "completed",
        {"phases": counters},
    )
    retried = phase_checkpoint({"previous": "verification", "reason": "retry", "counters": {}})
    assert (retried.phase_id, retried.status) == ("verification", "failed")
