"""Shared by the plan_exec tests (test_plan_exec*.py, and tests/engine/loop/test_resume.py
through test_plan_exec): the scripted engine with the real builtin tools on a workspace, a
Verifier that answers with given outcomes, and small builders for scripted turns."""

from __future__ import annotations

from apps.engine.ports import VerificationOutcome
from apps.engine.task import AgentTask
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import available_tool_names, build_tools
from tests.engine.helpers import HookRecorder, config, of_type, scripted_engine

TASK = AgentTask(task_id=1, goal="fix the failing test", mode="plan_exec")
FAIL = VerificationOutcome(
    passed=False,
    errors=("tests/test_slug.py::test_runs_of_separators_collapse FAILED",),
    log="=== 1 failed, 2 passed ===\nAssertionError: 'hello-world!' != 'hello-world'",
    commands=("pytest -x -q", "ruff check"),
)
PASS = VerificationOutcome(passed=True, log="=== 3 passed ===", commands=("pytest -x -q",))


class Outcomes:
    """The Verifier port, answering with the given outcomes in order (the last one repeats)."""

    def __init__(self, *outcomes: VerificationOutcome):
        self.outcomes = list(outcomes)
        self.answers: list[str] = []

    async def __call__(self, answer: str) -> VerificationOutcome:
        self.answers.append(answer)
        return self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]


def tools_in(root):
    from apps.engine.plan.gate import active_command_filter

    ctx = ToolContext(root=root, command_filter=active_command_filter)
    return build_tools(ctx, available_tool_names())


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def turn(*calls, text="", **conditions):
    return {"text": text or "step", "tool_calls": list(calls), **conditions}


def engine_for(turns, root, *, verifier=None, **sections):
    sections.setdefault("streaming", {"flush_interval_ms": 0})
    hooks = HookRecorder()
    engine, model = scripted_engine(
        turns, tools=tools_in(root), cfg=config(**sections), verifier=verifier, hooks=hooks
    )
    return engine, model, hooks


def changes(events):
    return [
        (e.data["previous"], e.data["phase"], e.data["reason"])
        for e in of_type(events, "phase_changed")
    ]


EDIT = call(
    "str_replace_editor",
    command="str_replace",
    path="textkit/slug.py",
    old_str='r"[^a-zA-Z0-9]"',
    new_str='r"[^a-zA-Z0-9]+"',
)
