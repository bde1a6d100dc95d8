"""Reference model policies that prove the harness: models whose behaviour is known, played by
the `scripted` provider (`models.<alias>.policy`), so they drive the real engine, tools,
sandbox and verification like any model.

- `oracle`: reads the module, writes the canonical solution with str_replace_editor, answers.
  Every problem solved in every mode, or the harness is wrong.
- `null`: answers at once without touching the workspace. Nothing solved.
- `wrong_first`: reads the module, writes a subtly wrong body (every value it returns is off:
  a flipped bool, a number one too big, a sequence missing an element), answers; it writes the
  canonical solution only once it has been shown a failing test after its last edit (pytest's
  `FAILED ...`, an `AssertionError`, `N failed` in a user message or a tool result). So it is
  solved where verification feeds failing tests back (plan_exec) and not where nothing does
  (react with verification off) — unless the model runs the tests itself, which it never does.

A policy decides from the request alone (its messages and offered tools), like a model: the
problem from the goal's id (`HumanEval/12`), its own earlier tool calls and their results from
the conversation. The planner (plan_exec, team_collab) gets a one-phase spec; a reflect call a
short reflection. A tool refused with phase_violation (plan_exec's planning phase refuses
str_replace_editor) makes it call advance_phase, as the refusal's hint says.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from apps.engine.config import AgentkitConfig, ModelConfig
from apps.engine.evals.humaneval import MODULE_FILE, STUB_BODY, TESTS_FILE, Problem, problem_in
from apps.engine.llm.providers.script import ScriptToolCall, ScriptTurn
from apps.engine.llm.providers.scripted import ScriptedProvider, answered_message
from apps.engine.llm.types import ChatRequest, Message

POLICIES = ("null", "oracle", "wrong_first")
PLANNER_REQUEST = "Plan this task as a spec."
FAILING_TEST = re.compile(r"(?m)^(FAILED|ERROR) \S+|AssertionError|\b\d+ failed\b")
EDITOR, READER, ADVANCE = "str_replace_editor", "read_file", "advance_phase"

NUDGE = """\
def _nudged(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value[:-1] if value else "0"
    if isinstance(value, list | tuple):
        return value[:-1] if value else type(value)([0])
    if isinstance(value, dict):
        return dict(list(value.items())[:-1]) if value else {None: None}
    return 0 if value is None else None
"""


class PolicyProvider(ScriptedProvider):
    """The scripted provider with a policy in place of a script: `pick` decides each turn."""

    def __init__(self, policy: str, *, alias: str = "main", model: ModelConfig | None = None,
                 chunk_delay: float = 0.0):  # fmt: skip
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; one of {', '.join(POLICIES)}")
        super().__init__(
            {"description": f"policy {policy}", "turns": ["(decided by the policy)"]},
            alias=alias,
            model=model,
            chunk_delay=chunk_delay,
        )
        self.policy = policy

    @classmethod
    def from_config(cls, alias: str, model: ModelConfig, config: AgentkitConfig):
        return cls(model.policy, alias=alias, model=model, chunk_delay=model.chunk_delay_ms / 1000)

    def __repr__(self) -> str:
        return f"<PolicyProvider {self.alias}: {self.policy}, {len(self.requests)} calls>"

    def pick(self, request: ChatRequest, *, consume: bool = True) -> ScriptTurn:
        return decide(self.policy, request)


def decide(policy: str, request: ChatRequest) -> ScriptTurn:
    last = answered_message(request)
    text = last.content if last else ""
    if text.startswith(PLANNER_REQUEST):
        return ScriptTurn(text=json.dumps(_spec(request), sort_keys=True))
    offered = {tool.name for tool in request.tools}
    if not offered:  # a reflect call, or a phase that only talks
        return _say(
            "What failed: the tests named in the verification output. Next: make the function "
            "return what its docstring's examples expect."
        )
    problem = _problem(request.messages)
    if problem is None:
        return _say(f"The reference policy {policy!r} only knows HumanEval problems.")
    if policy == "null":
        return _say("Done.")
    if last is not None and last.is_error and "phase_violation" in text and ADVANCE in offered:
        return _call(ADVANCE, {"summary": "Done here; moving on."}, offered, "Next phase.")
    calls = _own_calls(request.messages)
    if not any(name == READER and ok for name, _, ok, _ in calls):
        return _call(READER, {"path": MODULE_FILE}, offered, "Reading the stub.")
    edits = [(args, after) for name, args, ok, after in calls if name == EDITOR and ok]
    right, wrong = problem.canonical_solution, subtly_wrong(problem)
    written = edits[-1][0].get("new_str") if edits else None
    if policy == "oracle" and written != right:
        return _edit(STUB_BODY if written is None else written, right, offered)
    if policy == "wrong_first":
        if written is None:
            return _edit(STUB_BODY, wrong, offered)
        if written == wrong and _shown_failure(edits[-1][1]):
            return _edit(wrong, right, offered)
    return _say(f"`{problem.entry_point}` in {MODULE_FILE} is written.")


def subtly_wrong(problem: Problem) -> str:
    """The canonical body with every value the function itself returns nudged off."""
    tree = ast.parse(problem.prompt + problem.canonical_solution)
    function = next(
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == problem.entry_point
    )
    body = function.body[1:] if ast.get_docstring(function) is not None else function.body
    for statement in body:
        _Nudger().visit(statement)
    lines = NUDGE.splitlines() + [ast.unparse(statement) for statement in body]
    return "".join(f"    {line}\n" if line else "\n" for line in "\n".join(lines).splitlines())


class _Nudger(ast.NodeTransformer):
    def visit_Return(self, node: ast.Return) -> ast.Return:
        value = node.value or ast.Constant(None)
        node.value = ast.Call(ast.Name("_nudged", ast.Load()), [value], [])
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        return node  # a nested function's returns are its own

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        return node


def _problem(messages: tuple[Message, ...] | list[Message]) -> Problem | None:
    for message in messages:
        if message.role == "user" and (problem := problem_in(message.content)):
            return problem
    return None


def _own_calls(messages) -> list[tuple[str, dict[str, Any], bool, list[Message]]]:
    """(tool, arguments, succeeded, the messages after its result) of each earlier call."""
    results = {
        m.tool_call_id: (i, m)
        for i, m in enumerate(messages)
        if m.role == "tool" and m.tool_call_id
    }
    calls = []
    for message in messages:
        for call in message.tool_calls:
            index, result = results.get(call.id, (len(messages), None))
            ok = result is not None and not result.is_error
            calls.append((call.name, dict(call.arguments), ok, list(messages[index:])))
    return calls


def _shown_failure(after: list[Message]) -> bool:
    return any(m.role in ("user", "tool") and FAILING_TEST.search(m.content or "") for m in after)


def _edit(old: str, new: str, offered: set[str]) -> ScriptTurn:
    arguments = {"command": "str_replace", "path": MODULE_FILE, "old_str": old, "new_str": new}
    return _call(EDITOR, arguments, offered, "Writing the function.")


def _call(tool: str, arguments: dict[str, Any], offered: set[str], text: str) -> ScriptTurn:
    if tool not in offered:
        return _say("I cannot continue: the tools I need are not offered.")
    return ScriptTurn(text=text, tool_calls=[ScriptToolCall(name=tool, arguments=arguments)])


def _say(text: str) -> ScriptTurn:
    return ScriptTurn(text=text)


def _spec(request: ChatRequest) -> dict[str, Any]:
    problem = _problem(request.messages)
    name = f"`{problem.entry_point}`" if problem else "the function"
    return {  # the id in the goal: team_collab's experts see the spec's goal, not the task's
        "goal": f"{problem.id if problem else 'the task'}: write {name} in {MODULE_FILE}",
        "summary": f"Read the stub, write the body of {name}, check it with {TESTS_FILE}.",
        "phases": [
            {
                "id": "implement",
                "title": f"Write {name}",
                "instructions": f"Read {MODULE_FILE}, write the body with str_replace_editor.",
            }
        ],
        "verification_commands": [],
        "acceptance_criteria": [f"the examples in {TESTS_FILE} pass"],
    }
