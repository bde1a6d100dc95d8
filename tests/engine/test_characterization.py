"""Characterization (seed 002 U3, written before phases existed): react and direct_chat runs
produce exactly the events and model requests recorded in golden/characterization.json, which
was generated from the engine before plan_exec was added (`python -m
tests.engine.test_characterization > tests/engine/golden/characterization.json` on that commit; re-recorded once, on 1d254ed, when the
prompt layers of issue 13 changed the system prompt bytes, before plan_exec was merged; and
once more when a step's first tool_call began to carry the run's usage so far, which was the only
difference; and once more when task_finished began to carry the run's `outcome`, the only
difference).
With no phase policy, nothing changes: no advance_phase tool, no phase events, same bytes."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from apps.engine.ports import VerificationOutcome
from apps.engine.task import AgentTask
from tests.engine.helpers import DivideTool, EchoTool, ThinkTool, collect, config, scripted_engine

GOLDEN = Path(__file__).parent / "golden" / "characterization.json"

REACT_TURNS = [
    {"text": "Echo first.", "tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]},
    {
        "text": "Now divide.",
        "tool_calls": [{"name": "divide", "arguments": {"a": 1, "b": 0}}],
        "after_tool": "echo",
    },
    {
        "text": "Fixing.",
        "tool_calls": [{"name": "divide", "arguments": {"a": 6, "b": 2}}],
        "after_tool": "divide",
        "tool_error": True,
    },
    {"text": "HI and", "finish_reason": "length", "after_tool": "divide", "tool_error": False},
    {"text": "HI and 3.", "match": "cut off"},
    {"text": "HI and 3, checked.", "match": "(?i)verification"},
]


class Outcomes:
    def __init__(self, *outcomes: VerificationOutcome):
        self.outcomes = list(outcomes)

    async def __call__(self, answer: str) -> VerificationOutcome:
        return self.outcomes.pop(0)


def _normal(events) -> list[dict]:
    out = []
    for event in events:
        data = {k: v for k, v in event.data.items() if k != "duration_ms"}
        out.append({"type": event.type, "seq": event.seq, "data": data})
    return json.loads(json.dumps(out, default=str))


def _requests(model) -> list[dict]:
    return [
        {
            "system": [block.text.split("Today is")[0] for block in request.system],
            "tools": [tool.name for tool in request.tools],
            "messages": [
                [m.role, m.content, [c.name for c in m.tool_calls]] for m in request.messages
            ],
        }
        for request in model.requests
    ]


async def record_runs() -> dict:
    runs = {}
    tools = [EchoTool(), DivideTool(), ThinkTool()]
    engine, model = scripted_engine(
        REACT_TURNS, tools=tools, cfg=config(streaming={"flush_interval_ms": 0})
    )
    events = await collect(engine, AgentTask(task_id=1, goal="echo hi then divide"))
    runs["react"] = {"events": _normal(events), "requests": _requests(model)}

    fail = VerificationOutcome(passed=False, errors=("test_x failed",), log="1 failed")
    verifier = Outcomes(fail, VerificationOutcome(passed=True, log="ok"))
    cfg = config(streaming={"flush_interval_ms": 0}, verification={"modes": {"react": True}})
    engine, model = scripted_engine(REACT_TURNS, tools=tools, cfg=cfg, verifier=verifier)
    events = await collect(engine, AgentTask(task_id=2, goal="echo hi then divide"))
    runs["react_verified"] = {"events": _normal(events), "requests": _requests(model)}

    engine, model = scripted_engine(
        ["Hello there."],
        tools=tools,
        cfg=config(streaming={"flush_interval_ms": 0}),
        verifier=Outcomes(fail),
    )
    events = await collect(engine, AgentTask(task_id=3, goal="hi", mode="direct_chat"))
    runs["direct_chat"] = {"events": _normal(events), "requests": _requests(model)}
    return runs


async def test_react_and_direct_chat_runs_match_the_recording_from_before_phases():
    golden = json.loads(GOLDEN.read_text())
    runs = await record_runs()
    for name in ("react", "react_verified", "direct_chat"):
        assert runs[name]["requests"] == golden[name]["requests"], name
        assert runs[name]["events"] == golden[name]["events"], name


async def test_react_run_offers_no_advance_phase_even_when_the_tool_set_has_it():
    from apps.tools.builtin.advance_phase import AdvancePhaseTool
    from apps.tools.builtin.context import ToolContext

    tools = [EchoTool(), AdvancePhaseTool(ToolContext(root=Path(".")))]
    engine, model = scripted_engine(["Done."], tools=tools)
    events = await collect(engine, AgentTask(task_id=4, goal="hi"))
    assert [tool.name for tool in model.requests[0].tools] == ["echo"]
    assert events[0].data["tools"] == ["echo"]
    assert not [e for e in events if e.type.startswith(("phase", "budget", "reflection"))]
    assert "phases" not in events[-1].data


if __name__ == "__main__":
    json.dump(asyncio.run(record_runs()), sys.stdout, indent=1, sort_keys=True)
