"""The scripted task the engine benchmarks drive (engine_overhead, step_side_by_side): a task of
N steps, each a short sentence and a call of a no-op tool from a zero-latency model, then the
answer; the model client wrapped to add up the time spent waiting on its streams; and the null
run, the same model calls with no engine, that gives the harness's own floor."""

from __future__ import annotations

import time

from apps.engine.config import parse_config
from apps.engine.llm.types import ChatRequest, Message, ToolCall
from apps.engine.loop.react import ReActEngine
from apps.engine.plan.phases import PhasePolicy, PhaseState
from apps.engine.task import AgentTask
from apps.engine.tools import Tool, ToolResult, ToolSet

# A fixed usage per call: the scripted model then skips its prompt-cache simulation (which
# serializes the whole prompt on every call), so its own work stays small and the same at every
# step, and does not crowd the engine's data out of the CPU caches between steps.
USAGE = {"input_tokens": 1000, "output_tokens": 5}


def script(steps: int) -> list[dict]:
    return [
        {"text": "All steps done.", "match": f"^step {steps}$", "repeat": True, "usage": USAGE},
        {
            "text": "Next step.",
            "tool_calls": [{"name": "noop", "arguments": {}}],
            "repeat": True,
            "usage": USAGE,
        },
    ]


class NoopTool(Tool):
    """Does nothing; its output counts the calls so that no two observations are the same."""

    name = "noop"
    description = "Does nothing."
    input_schema = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.calls = 0

    async def execute(self) -> ToolResult:
        self.calls += 1
        return ToolResult.success(f"step {self.calls}")


class TimedModel:
    """Wraps a model client and adds up the time spent waiting on its streams (on `clock`)."""

    def __init__(self, inner, *, after_call=None, clock=time.perf_counter) -> None:
        self.inner = inner
        self.after_call = after_call
        self.clock = clock
        self.waited = 0.0

    async def complete(self, request, *, model=None):
        """A whole answer (a summary): with it, the engine sets up context compression, and
        checks the prompt's size before every model call, as it does on the gateway."""
        started = self.clock()
        try:
            return await self.inner.complete(request, model=model)
        finally:
            self.waited += self.clock() - started

    async def stream(self, request, *, model=None):
        # The engine stops reading at the final response and closes this stream. Closing the
        # model's own stream (the gateway's, the provider's) is the model's time too: it is done
        # in the same timed wait as the response (fewer clock calls, each a system call on the
        # CPU clock, whose cost falls partly on the engine's side).
        deltas = aiter(self.inner.stream(request, model=model))
        clock, closed = self.clock, False
        try:
            while True:
                started = clock()
                try:
                    delta = await anext(deltas)
                except StopAsyncIteration:
                    self.waited += clock() - started
                    return
                if delta.response is not None:
                    await deltas.aclose()
                    closed = True
                self.waited += clock() - started
                yield delta
        finally:
            if not closed:  # stopped early (a failure): close it, timed as the model's
                started = clock()
                await deltas.aclose()
                self.waited += clock() - started
            if self.after_call is not None:
                self.after_call()


# plan_exec: noop allowed in every phase, so the run stays in planning and each step is checked.
NOOP_POLICY = PhasePolicy(
    whitelist={phase: frozenset({"noop"}) for phase in PhaseState},
    command_filter={phase: None for phase in PhaseState},
)


async def run_task(
    gateway, cfg, steps: int, *, after_call=None, mode: str = "react", clock=time.perf_counter
) -> tuple[float, float, int]:
    """(seconds, seconds waiting on the model, events) for one task of `steps` tool calls, on
    `clock` (the wall clock by default)."""
    model = TimedModel(gateway, after_call=after_call, clock=clock)
    engine = ReActEngine(model, ToolSet([NoopTool()]), cfg, phase_policy=NOOP_POLICY)
    started = clock()
    events = 0
    task = AgentTask(task_id=1, goal="go", max_steps=steps + 1, mode=mode)
    async for event in engine.run(task):
        events += 1
        last = event
    wall = clock() - started
    if last.data["status"] != "completed" or last.data["steps"] != steps + 1:
        raise RuntimeError(f"benchmark task did not complete as scripted: {last.data}")
    return wall, model.waited, events


def null_requests(steps: int) -> list[ChatRequest]:
    """The model requests of a task of `steps` tool calls, as the engine sends them (the same
    conversation each step, one call and its result longer), built before any clock runs."""
    messages = [Message("user", "go")]
    requests = [ChatRequest(tuple(messages))]
    for step in range(1, steps + 1):
        call = ToolCall(f"call_{step}", "noop", {})
        messages += [
            Message("assistant", "Next step.", (call,)),
            Message("tool", f"step {step}", tool_call_id=call.id, name="noop"),
        ]
        requests.append(ChatRequest(tuple(messages)))
    return requests


async def null_task(
    gateway, requests: list[ChatRequest], *, after_call=None, clock=time.perf_counter
) -> tuple[float, float, int]:
    """The harness alone, no engine: the same model calls through the same TimedModel, on the
    same clock, and nothing done between them but reading each stream up to its response and
    closing it, as the engine does. Its "overhead" (time of the run minus the time waiting on
    the model) is what the measurement itself charges to the engine side: the clock calls
    around each chunk (a system call each on the CPU clock), TimedModel's own generator, the
    stream's closing after the response, the request log's clearing."""
    model = TimedModel(gateway, after_call=after_call, clock=clock)
    started = clock()
    for request in requests:
        stream = model.stream(request)
        async for delta in stream:
            if delta.response is not None:
                break
        await stream.aclose()
    return clock() - started, model.waited, 0


def config(models: dict | None = None, max_steps: int = 1000):
    return parse_config(
        {
            **({"models": models} if models else {}),
            "react": {"max_steps": max_steps},
            "llm": {"retries": {"max_attempts": 1}},
            # plan_exec row: budgets counted every step but never reached; no verifier is given.
            "plan_exec": {
                "auto_advance_after_steps": None,
                "phase_budgets": {"think": 10_000, "verify": 10_000},
            },
        }
    )
