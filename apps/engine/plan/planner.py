"""The planner: a goal (with the pitfalls retrieved for it) becomes a `SpecDraft` (spec.py) by
structured output on the main model. The request asks for one JSON object of SpecDraft's schema
(`ChatRequest.structured`): the provider uses what the endpoint has — OpenAI `response_format:
json_schema`, a forced `submit_spec` tool call (Anthropic; OpenAI-compatible servers with
`structured_output: tool`), or the words of the prompt alone (`prompt`, the scripted model). A
refusal of the way asked steps down by itself — json_schema, then the forced tool, then the
prompt's words with parse-and-ask-again — when its body names the feature (any 4xx/5xx saying
response_format, json_schema, tool_choice: the gateway does not retry those) or is a plain 400
(straight to the prompt); the way that worked is remembered per alias for the process
(structured.py), and a step down costs no attempt. The reply
(the text, or the forced call's arguments) is validated with pydantic, and an invalid one is sent
back with the validation errors (as the forced call's tool result when it was one), at most
`planner.max_attempts` replies in all. None valid → `PlannerFailed` carrying an `invalid_spec`
error that says what was wrong and what to do; a model error propagates (the run fails), so a
planning failure is an error, never a hang.

A revision is planned the same way, from the previous draft and the reviewer's feedback.
Framework-free: the model is any `ModelClient` (the gateway in the runner).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from apps.engine.events import ErrorStruct
from apps.engine.llm.errors import (
    AuthenticationError,
    ContextWindowError,
    LLMStatusError,
    RateLimitError,
    names_capability,
)
from apps.engine.llm.structured import (
    StructuredMode,
    memory_key,
    remember_mode,
    remembered_mode,
    step_down,
    structured_mode,
)
from apps.engine.llm.types import (
    ChatRequest,
    ChatResponse,
    Message,
    StructuredOutput,
    TextBlock,
    Usage,
)
from apps.engine.plan.spec import SNAPSHOT, SpecDraft
from apps.engine.ports import ModelClient

log = logging.getLogger(__name__)

PLAN_REQUEST = "Plan this task as a spec."  # the first words of every planner request
SPEC_TOOL = "submit_spec"
SPEC_OUTPUT = StructuredOutput(
    name=SPEC_TOOL,
    description="Submit the spec: the whole plan as one object.",
    schema=SpecDraft.model_json_schema(),
)
SYSTEM = f"""You are the planner of a coding agent. You do not do the work: you write the spec \
that the agent (or a team of experts) will follow, and that a person reviews before anything \
runs.

Reply with ONE JSON object and nothing else (no prose, no code fence), of this shape:
{{"goal": str, "summary": str,
  "phases": [{{"id": "lowercase-slug", "title": str, "role": str, "instructions": str,
              "depends_on": [phase ids], "validation_command": str | null,
              "rollback_command": str | null}}],
  "verification_commands": [shell commands that prove the whole goal is met],
  "acceptance_criteria": [short sentences a reviewer can check]}}

Rules: 1 to 20 phases; ids unique slugs (a-z, 0-9, - or _); depends_on names earlier phases \
and has no cycle; a phase's role is one of the roles offered; validation_command checks that \
phase alone; rollback_command undoes it ("{SNAPSHOT}" restores the files as they were before the \
phase). Keep instructions concrete: files, functions, commands. When the {SPEC_TOOL} tool is \
offered, call it with that object as its arguments."""


class PlannerFailed(Exception):
    """No valid spec within the attempts; `error` is the `invalid_spec` error for the user."""

    def __init__(self, error: ErrorStruct, attempts: int, spent: PlanResult | None = None):
        super().__init__(error.message)
        self.error = error
        self.attempts = attempts
        self.spent = spent  # the calls made (usage, cost): a failed plan still cost tokens


@dataclass
class PlanResult:
    draft: SpecDraft
    attempts: int
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    llm_calls: int = 0


class Planner:
    def __init__(
        self,
        model: ModelClient,
        *,
        model_alias: str | None = None,
        max_attempts: int = 3,
        max_tokens: int = 4096,
        roles: Sequence[str] = ("coder",),
        temperature: float | None = None,
    ):
        self.model = model
        self.model_alias = model_alias
        self.max_attempts = max_attempts
        self.max_tokens = max_tokens
        self.roles = tuple(sorted(set(roles))) or ("coder",)
        self.temperature = temperature  # where the alias sets none (react.step_temperature)

    async def draft(
        self,
        goal: str,
        *,
        mode: str = "plan_exec",
        pitfalls: str = "",
        previous: SpecDraft | None = None,
        feedback: str = "",
    ) -> PlanResult:
        """A valid draft for `goal`, or PlannerFailed. LLM errors propagate (the run fails)."""
        messages = [Message("user", self.request_text(goal, mode, pitfalls, previous, feedback))]
        result = PlanResult(draft=None, attempts=0)  # type: ignore[arg-type]
        errors: list[str] = []
        alias = self._alias()
        own = self._own_mode(alias)
        mode = remembered_mode(self._memory_key(alias)) or own
        for attempt in range(1, self.max_attempts + 1):
            result.attempts = attempt
            while True:  # a refused way of asking steps down; it costs no attempt
                try:
                    reply = await self._ask(messages, result, _output(mode))
                    break
                except LLMStatusError as exc:
                    lower = self._step_down(mode, exc)
                    if lower is None:
                        raise
                    log.warning("%s refused structured output as %s; asking by %s: %s",
                                alias, mode, lower, exc)  # fmt: skip
                    mode = lower
            if mode != own:  # a step down that worked: this alias's next plans start there
                remember_mode(self._memory_key(alias), mode)
            draft, errors = parse_draft(reply.structured_text(SPEC_TOOL), goal)
            if draft is not None:
                result.draft = draft
                return result
            messages += retry_messages(reply, errors)
        raise PlannerFailed(invalid_spec(errors, self.max_attempts), self.max_attempts, result)

    def _alias(self) -> str:
        return self.model_alias or getattr(self.model, "main_alias", "") or "main"

    def _memory_key(self, alias: str) -> str:
        config = getattr(self.model, "config", None)
        model = getattr(config, "models", {}).get(alias) if config is not None else None
        return memory_key(alias, model)

    def _own_mode(self, alias: str) -> StructuredMode:
        """The alias's configured way (`models.<alias>.structured_output`), where the model
        client has a config (the gateway); else json_schema, stepped down when refused."""
        config = getattr(self.model, "config", None)
        model = getattr(config, "models", {}).get(alias) if config is not None else None
        return structured_mode(model) if model is not None else "json_schema"

    @staticmethod
    def _step_down(mode: StructuredMode, exc: LLMStatusError) -> StructuredMode | None:
        """The next way after a refusal of `mode`, or None (the error stands): a refusal that
        names the feature (any 4xx/5xx whose body says response_format, json_schema,
        tool_choice, grammar), or a plain 400, steps down; a plain 400 straight to the prompt."""
        if mode == "prompt" or isinstance(
            exc, ContextWindowError | AuthenticationError | RateLimitError
        ):
            return None
        if names_capability(exc.body) or names_capability(str(exc)):
            return step_down(mode, exc.body)
        return "prompt" if exc.status_code == 400 else None

    def request_text(
        self, goal: str, mode: str, pitfalls: str, previous: SpecDraft | None, feedback: str
    ) -> str:
        parts = [
            PLAN_REQUEST,
            f"Mode: {mode}",
            f"Roles you may assign: {', '.join(self.roles)}",
            f"Goal:\n{goal.strip()}",
        ]
        if pitfalls.strip():
            parts.append(
                f"Pitfalls seen before in this workspace (avoid them):\n{pitfalls.strip()}"
            )
        if previous is not None:
            spec = json.dumps(previous.model_dump(mode="json"), sort_keys=True, indent=1)
            parts.append(f"The previous spec, which the reviewer rejected:\n{spec}")
        if feedback.strip():
            parts.append(f"Reviewer feedback (revise the spec to address it):\n{feedback.strip()}")
        return "\n\n".join(parts)

    async def _ask(
        self, messages: list[Message], result: PlanResult, structured: StructuredOutput | None
    ) -> ChatResponse:
        request = ChatRequest(
            tuple(messages),
            (TextBlock(SYSTEM),),
            (),
            max_tokens=self.max_tokens,
            structured=structured,
            default_temperature=self.temperature,
        )
        response: ChatResponse | None = None
        stream = self.model.stream(request, model=self.model_alias)
        try:
            async for delta in stream:
                if delta.response is not None:
                    response = delta.response
        finally:
            if hasattr(stream, "aclose"):
                await stream.aclose()
        if response is None:
            raise RuntimeError("the model stream ended without a final response")
        result.usage += response.usage
        result.cost += response.cost
        result.llm_calls += 1
        return response


def _output(mode: StructuredMode) -> StructuredOutput | None:
    """The request's structured output for `mode` (prompt: none, the prompt's words)."""
    return None if mode == "prompt" else dataclasses.replace(SPEC_OUTPUT, mode=mode)


def parse_draft(text: str, goal: str) -> tuple[SpecDraft | None, list[str]]:
    """The draft in a reply, or None and the problems, one line each, for the model to fix."""
    body = text.strip()
    fenced = re.fullmatch(r"```[a-zA-Z]*\s*(.*?)\s*```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        return None, ["the reply contains no JSON object"]
    try:
        data = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        return None, [f"the JSON does not parse: {exc.msg} (line {exc.lineno}, col {exc.colno})"]
    if not isinstance(data, dict):
        return None, ["the reply must be a JSON object"]
    data.setdefault("goal", goal)
    try:
        return SpecDraft.model_validate(data), []
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "(the spec)"
            lines.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
        return None, lines


def retry_messages(reply: ChatResponse, errors: list[str]) -> list[Message]:
    """The invalid reply and what was wrong with it, for the next attempt: a forced
    `submit_spec` call gets its tool result (both APIs want every call answered)."""
    call = next((c for c in reply.tool_calls if c.name == SPEC_TOOL), None)
    if call is None:
        return [Message("assistant", reply.content), Message("user", retry_text(errors))]
    return [
        Message("assistant", reply.content, (call,)),
        Message("tool", retry_text(errors), (), call.id, SPEC_TOOL, True),
    ]


def retry_text(errors: list[str]) -> str:
    listed = "\n".join(f"- {line}" for line in errors)
    return (
        f"That spec is invalid:\n{listed}\n\nReply again with only the corrected JSON object "
        "(same shape, every problem fixed)."
    )


def invalid_spec(errors: list[str], attempts: int) -> ErrorStruct:
    shown = "; ".join(errors[:5]) or "no reply"
    return ErrorStruct(
        error_code="invalid_spec",
        message=f"the planner gave no valid spec in {attempts} attempt(s); last problems: {shown}",
        suggestions=[
            "Send the message again with a more precise goal (files, functions, expected "
            "behaviour).",
            "Raise planner.max_attempts in agentkit.yaml, or use a stronger model as llm.main.",
            "Use @react to work without a spec.",
        ],
        retryable=True,
    )
