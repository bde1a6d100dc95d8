"""SpecStage on the engine alone (framework-free), with an in-memory ReviewGate — a real
implementation of the port, kept in this process: a continuation starts from the stored spec
without replanning; a review that was cancelled before the run waited on it ends the run
cancelled (no endless re-review); a spec in a state that cannot run fails clearly."""

from __future__ import annotations

import json

from apps.engine.config.specs import SpecReviewConfig
from apps.engine.llm.gateway import Gateway
from apps.engine.loop.react import ReActEngine
from apps.engine.plan.planner import Planner
from apps.engine.plan.spec import SpecDraft, spec_review_id
from apps.engine.plan.spec_stage import SpecStage
from apps.engine.ports import ReviewDecision, StoredSpec
from apps.engine.task import AgentTask
from tests.engine.helpers import HookRecorder

DRAFT = SpecDraft.model_validate(
    {"goal": "g", "phases": [{"id": "one", "title": "Do it"}], "verification_commands": ["true"]}
)


class MemoryGate:
    def __init__(self, specs=(), decisions=None):
        self.specs = list(specs)
        self.decisions = dict(decisions or {})
        self.opened: list[str] = []

    async def latest(self):
        return self.specs[-1] if self.specs else None

    async def store(self, draft):
        spec = StoredSpec(len(self.specs) + 1, len(self.specs) + 1, "draft", draft)
        self.specs.append(spec)
        return spec

    async def open(self, spec_id):
        self.opened.append(spec_review_id(spec_id))
        return spec_review_id(spec_id)

    async def wait(self, review_id, timeout):
        return self.decisions.get(review_id)

    async def close(self, review_id, decision):
        return self.decisions.setdefault(review_id, ReviewDecision(decision))

    async def set_status(self, spec_id, status):
        old = self.specs[spec_id - 1]
        self.specs[spec_id - 1] = StoredSpec(old.spec_id, old.revision, status, old.draft)


async def run_with(gate, turns):
    gateway = Gateway.for_script(turns)
    commands: list[str] = []
    stage = SpecStage(
        Planner(gateway),
        gate,
        SpecReviewConfig(timeout_seconds=1),
        on_confirmed=lambda d: commands.extend(d.verification_commands),
    )
    hooks = HookRecorder()
    engine = ReActEngine(gateway, hooks=hooks, prelude=stage)
    events = [e async for e in engine.run(AgentTask(task_id=1, goal="do it", mode="plan_exec"))]
    return events, gateway.provider("main").requests, commands, hooks, stage


async def test_a_confirmed_spec_runs_without_replanning_or_review():
    gate = MemoryGate([StoredSpec(1, 1, "confirmed", DRAFT)])
    events, requests, commands, hooks, stage = await run_with(gate, ["Done."])
    assert events[-1].data["status"] == "completed" and commands == ["true"]
    assert len(requests) == 1 and "Confirmed spec (revision 1)" in requests[0].messages[-1].content
    assert gate.opened == [] and stage.confirmed.spec_id == 1
    assert gate.specs[0].status == "executing" and hooks.names == ["on_task_complete"]


async def test_a_review_cancelled_before_the_run_waited_ends_it_cancelled():
    gate = MemoryGate(
        [StoredSpec(1, 1, "pending_review", DRAFT)],
        {"1:spec_review": ReviewDecision("cancelled")},
    )
    events, requests, _, hooks, _ = await run_with(gate, ["Done."])
    kinds = [e.type for e in events]
    assert kinds.count("spec_review_resolved") == 1 and events[-1].data["status"] == "cancelled"
    assert requests == [] and gate.opened == ["1:spec_review"]
    assert hooks.names == ["on_task_cancelled"]


async def test_a_spec_that_cannot_run_fails_the_run_with_a_clear_error():
    gate = MemoryGate([StoredSpec(1, 1, "done", DRAFT)])
    events, _, _, _, _ = await run_with(gate, ["Done."])
    error = events[-1].data["error"]
    assert events[-1].data["status"] == "failed" and error["error_code"] == "spec_not_runnable"


async def test_a_timeout_parks_the_run_and_the_parked_hook_fires_once():
    gate = MemoryGate()
    events, requests, _, hooks, _ = await run_with(gate, [json.dumps(DRAFT.model_dump())])
    assert events[-1].data["status"] == "parked" and gate.specs[0].status == "parked"
    assert [e.data["decision"] for e in events if e.type == "spec_review_resolved"] == ["timed_out"]
    assert len(requests) == 1  # the planner only
    assert hooks.names == ["on_task_parked"]
