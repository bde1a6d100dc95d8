"""The other side of bench/step_side_by_side: smolagents' marginal tool-call step, the same way
as bench/_step_agentkit.py. Runs in its own virtual environment (smolagents only, no agentkit).

    python bench/_step_smolagents.py CORE   # prints {"short_s", "long_s", "marginal_us", "version"}
"""

from __future__ import annotations

import json
import os
import sys
import time

import smolagents
from smolagents import Model, Tool, ToolCallingAgent
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction
from smolagents.monitoring import LogLevel

SHORT, LONG, RUNS, WARMUP = 10, 30, 25, 5


class Noop(Tool):
    name = "noop"
    description = "Does nothing."
    inputs = {}
    output_type = "string"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self):
        self.calls += 1
        return f"step {self.calls}"


class InstantModel(Model):
    """Calls the tool `steps` times, then the final answer tool."""

    def __init__(self, steps: int) -> None:
        super().__init__(model_id="instant")
        self.steps, self.calls = steps, 0

    def generate(
        self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs
    ):
        self.calls += 1
        name, arguments = (
            ("noop", {}) if self.calls <= self.steps else ("final_answer", {"answer": "done"})
        )
        function = ChatMessageToolCallFunction(name=name, arguments=arguments)
        call = ChatMessageToolCall(id=f"call_{self.calls}", type="function", function=function)
        return ChatMessage(role="assistant", content="", tool_calls=[call])


def task_seconds(steps: int) -> float:
    agent = ToolCallingAgent(
        tools=[Noop()], model=InstantModel(steps), max_steps=steps + 2, verbosity_level=LogLevel.OFF
    )
    started = time.perf_counter()
    answer = agent.run("go")
    elapsed = time.perf_counter() - started
    if answer != "done":
        raise RuntimeError(f"the side-by-side task did not complete: {answer!r}")
    return elapsed


def fastest() -> tuple[float, float]:
    for _ in range(WARMUP):
        task_seconds(SHORT)
    short = min(task_seconds(SHORT) for _ in range(RUNS))
    long = min(task_seconds(LONG) for _ in range(RUNS))
    return short, long


if __name__ == "__main__":
    os.sched_setaffinity(0, {int(sys.argv[1])})
    short, long = fastest()
    marginal = (long - short) / (LONG - SHORT) * 1e6
    print(
        json.dumps(
            {
                "short_s": short,
                "long_s": long,
                "marginal_us": marginal,
                "version": smolagents.__version__,
            }
        )
    )
