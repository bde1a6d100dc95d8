"""What an interrupted plan_exec run resumes from, rebuilt from its stored events (seed 000 KTD-7).

A plan_exec task whose process died mid-run (apps/specs/checkpoints.py tells) runs again with:
- its confirmed spec: the spec stage finds it executing and goes straight on (no replanning; the
  planner is not asked again);
- the engine phase and budget counters where they were (`phases.reconstruct`): finished phases
  are not redone;
- the conversation so far: each finished step's assistant message (its streamed text and tool
  calls) and its tool results, from the `token`, `tool_call` and `tool_result` events;
- the step count, usage, cost and model calls so far (the totals the step's first `tool_call`
  carries).

A step the process died in (its tool calls without all their results, or text without any tool
call: an answer not yet through the gate) is dropped and taken again. What the loop told the
model between steps without an event of its own (a loop warning, a verification failure) is not
rebuilt. The resumed run emits `task_resumed` {phase, steps, restored_messages, llm_calls,
counters} after its spec stage, before its first step.

`ResumingPrelude` wraps the spec stage (the engine's `prelude`): it saves the `spec` checkpoint
when a spec is confirmed, and restores the ResumePoint, if any, into the run. No Django here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apps.engine.events import Event
from apps.engine.llm.types import Message, ToolCall, Usage
from apps.engine.loop.cancellation import CancellationToken
from apps.engine.plan.phases import PhaseTracker, reconstruct
from apps.engine.ports import CheckpointStore, PhaseCheckpoint

# The stored events a ResumePoint is rebuilt from (the runner loads only these).
RESUME_EVENT_TYPES = (
    "task_started",
    "task_resumed",
    "token",
    "tool_call",
    "tool_result",
    "phase_changed",
    "budget_exhausted",
    "reflection",
    "task_finished",
)
STEP_TYPES = frozenset({"token", "tool_call", "tool_result"})
RUN_STARTS = frozenset({"task_started", "task_resumed"})


@dataclass
class _Step:
    number: int
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    results: dict[str, Message] = field(default_factory=dict)
    totals: Mapping[str, Any] | None = None  # the first tool_call's usage/cost: totals so far

    @property
    def complete(self) -> bool:
        return bool(self.calls) and all(call.id in self.results for call in self.calls)

    def messages(self) -> list[Message]:
        return [
            Message("assistant", self.text, tuple(self.calls)),
            *(self.results[call.id] for call in self.calls),
        ]


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run goes on from."""

    messages: tuple[Message, ...]  # after the goal message
    steps: int
    usage: Usage
    cost: float
    llm_calls: int
    events: tuple[Mapping[str, Any], ...]  # the phase events up to `steps` (for reconstruct)

    def tracker(self, start: PhaseTracker) -> PhaseTracker:
        """The run's PhaseTracker as it was: `start` (the fresh run's) rebuilt from the events."""
        return reconstruct(self.events, start.policy, start.budgets)


def _kind_and_data(event: Any) -> tuple[str, Mapping[str, Any]]:
    if isinstance(event, Mapping):
        return event["type"], event.get("data") or {}
    return event.type, event.data


def resume_point(events: Iterable[Any]) -> ResumePoint | None:
    """The ResumePoint of a task's stored events (Event objects or {type, data} dicts, in seq
    order, of all its runs so far); None when no step was finished (nothing to go on from: the
    run starts as a new one)."""
    done: list[_Step] = []
    current: _Step | None = None
    phase_events: list[Mapping[str, Any]] = []  # those with counters, for reconstruct

    def close() -> None:
        nonlocal current
        if current is not None and current.complete:
            done.append(current)
        current = None

    for event in events:
        kind, data = _kind_and_data(event)
        if kind in RUN_STARTS:
            close()  # a step the last run died in is over: the next run took it again
            continue
        if kind not in STEP_TYPES:
            phase_events.append({"type": kind, "data": data})
            continue
        step = data.get("step")
        if not isinstance(step, int):
            continue
        if current is None or current.number != step:
            close()
            current = _Step(step)
        if kind == "token":
            current.text = "" if data.get("restart") else current.text + (data.get("text") or "")
        elif kind == "tool_call":
            current.calls.append(
                ToolCall(str(data.get("call_id")), str(data.get("name")), data.get("arguments"))
            )
            if current.totals is None and "usage" in data:
                current.totals = data
        else:
            current.results[str(data.get("call_id"))] = _observation(data)
    close()
    if not done:
        return None
    last = done[-1].number
    totals = next((s.totals for s in reversed(done) if s.totals is not None), None) or {}
    usage = dict(totals.get("usage") or {})
    llm_calls = int(usage.pop("llm_calls", 0) or 0)
    fields = {k: int(v or 0) for k, v in usage.items() if k in Usage.__dataclass_fields__}
    counted = [e for e in phase_events if _counters_step(e) <= last]
    counted += [{"type": "tool_result", "data": {"step": last}}]  # steps after the snapshot
    return ResumePoint(
        messages=tuple(m for step in done for m in step.messages()),
        steps=last,
        usage=Usage(**fields),
        cost=float(totals.get("cost") or 0.0),
        llm_calls=llm_calls,
        events=tuple(counted),
    )


def _counters_step(event: Mapping[str, Any]) -> int:
    data = event["data"]
    counters = data.get("phases") if event["type"] == "task_finished" else data.get("counters")
    return int((counters or {}).get("step") or 0)


def _observation(data: Mapping[str, Any]) -> Message:
    """The tool message the model saw (ToolResult.for_model) from a tool_result event."""
    ok = bool(data.get("ok", True))
    output = data.get("output") or ""
    if ok:
        text = output
    else:
        text = f"ERROR [{data.get('error_code')}]: {data.get('error')}"
        text = f"{text}\n{output}" if output else text
    return Message(
        "tool",
        text,
        tool_call_id=str(data.get("call_id")),
        name=str(data.get("name")),
        is_error=not ok,
    )


def restore(run: Any, point: ResumePoint) -> Event:
    """Put `point` into a fresh run (RunState after its spec stage); returns `task_resumed`."""
    if run.tracker is not None:
        run.tracker = point.tracker(run.tracker)
    run.messages.extend(point.messages)
    run.steps = point.steps
    run.usage = point.usage + run.usage
    run.cost += point.cost
    run.llm_calls += point.llm_calls
    counters = run.tracker.counters() if run.tracker is not None else None
    return run.event(
        "task_resumed",
        phase=counters["phase"] if counters else None,
        steps=point.steps,
        restored_messages=len(point.messages),
        llm_calls=run.llm_calls,
        counters=counters,
    )


class ResumingPrelude:
    """plan_exec's prelude: the spec stage (or none), then the `spec` checkpoint of a newly
    confirmed spec, or — resuming — the restored ResumePoint and `task_resumed`."""

    def __init__(
        self,
        stage: Any | None,
        point: ResumePoint | None = None,
        checkpoints: CheckpointStore | None = None,
    ):
        self.stage = stage
        self.point = point
        self.checkpoints = checkpoints

    async def __call__(self, run: Any, cancel: CancellationToken | None) -> AsyncIterator[Event]:
        if self.stage is not None:
            async for event in self.stage(run, cancel):
                yield event
        confirmed = getattr(self.stage, "confirmed", None)
        if self.point is not None:
            yield restore(run, self.point)
        elif self.checkpoints is not None and confirmed is not None:
            counters = run.tracker.counters() if run.tracker is not None else {}
            await self.checkpoints.save(
                PhaseCheckpoint(
                    "spec",
                    "completed",
                    {
                        "spec_id": confirmed.spec_id,
                        "revision": confirmed.revision,
                        "phases": counters,
                        "usage": run.usage_so_far(),
                        "cost": run.cost,
                    },
                )
            )


def phase_checkpoint(data: Mapping[str, Any]) -> PhaseCheckpoint:
    """The checkpoint of the phase a `phase_changed` event leaves (its counters as the new phase
    starts): completed, or failed when a failed verification sent the run back (retry)."""
    status = "failed" if data.get("reason") == "retry" else "completed"
    return PhaseCheckpoint(str(data.get("previous")), status, {"phases": data.get("counters")})
