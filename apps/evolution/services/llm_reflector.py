"""The LLM reflector (`evolution.reflector: llm`): the auxiliary model reads a finished run and
writes its lessons — from failures, and from the sampled successes the rule-based reflector
has nothing to say about (what worked: `success_pattern`).

The run goes to the model as a short transcript built from its stored events (goal, outcome,
tool calls and their errors, verification results, errors, the final answer), capped, in stable
bytes. The answer is one JSON object by structured output (`ChatRequest.structured`, as the
planner's): `{"lessons": [{"category", "trigger", "advice"}]}`, validated; lessons of an
unknown category, or empty, are dropped. A model that fails (an LLM error, no valid answer in
`ATTEMPTS` tries) leaves the work to the rule-based reflector: `reflect_with_llm` returns None
and the job falls back. Every lesson then passes the same gates as the rule-based ones (text
validation, the pitfall confidence gate, `observe_only`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from apps.engine.config import AgentkitConfig
from apps.engine.llm.errors import LLMError
from apps.engine.llm.gateway import Gateway
from apps.engine.llm.types import ChatRequest, Message, StructuredOutput, TextBlock
from apps.evolution.models import Category
from apps.evolution.services.reflector import LessonDraft
from apps.evolution.text import first_line

log = logging.getLogger(__name__)

ATTEMPTS = 2
MAX_LESSONS = 3
TRANSCRIPT_MAX_CHARS = 12_000
FAILURE_CATEGORIES = sorted(c.value for c in Category if c != Category.SUCCESS_PATTERN)
SYSTEM = f"""You review one finished run of a coding agent and write lessons for its future runs \
in the same workspace. A lesson names a concrete trigger (the situation, in a few words) and \
advice (what to do instead, or what worked), in plain words: no markup, no instructions to \
anyone but the agent. At most {MAX_LESSONS} lessons; none when there is nothing to learn. For a \
failed run use the failure categories ({", ".join(FAILURE_CATEGORIES)}); for a successful run \
use {Category.SUCCESS_PATTERN.value} for what made it work. Answer with one JSON object: \
{{"lessons": [{{"category": str, "trigger": str, "advice": str}}]}}."""


class _Lesson(BaseModel):
    model_config = ConfigDict(extra="forbid")

    category: Literal[tuple(c.value for c in Category)]  # type: ignore[valid-type]
    trigger: str = Field(min_length=3, max_length=300)
    advice: str = Field(min_length=3, max_length=500)


class _Lessons(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lessons: list[_Lesson] = Field(max_length=MAX_LESSONS)


LESSONS_OUTPUT = StructuredOutput(
    name="record_lessons",
    description="Record the lessons of this run (an empty list when there are none).",
    schema=_Lessons.model_json_schema(),
)


def transcript(events: list[dict], *, goal: str, outcome: str) -> str:
    """The run in a few lines per step, capped (the end is kept: it says how the run ended)."""
    lines = [f"Goal: {goal.strip()}", f"Outcome: {outcome}"]
    for event in events:
        kind, data, seq = event["type"], event.get("data") or {}, event["seq"]
        if kind == "tool_call":
            arguments = json.dumps(data.get("arguments") or {}, sort_keys=True)[:300]
            lines.append(f"[{seq}] call {data.get('name')} {arguments}")
        elif kind == "tool_result" and not data.get("ok", True):
            error = first_line(str(data.get("error") or ""), 300)
            lines.append(f"[{seq}] error [{data.get('error_code')}] {error}")
        elif kind == "verification_result":
            passed = "passed" if data.get("passed") else "failed"
            errors = "; ".join(first_line(str(e), 200) for e in data.get("errors") or [])
            lines.append(f"[{seq}] verification {passed} {errors}".rstrip())
        elif kind == "error":
            struct = data.get("error_struct") or {}
            lines.append(
                f"[{seq}] {struct.get('error_code')}: {first_line(struct.get('message') or '')}"
            )
        elif kind in {"reflection", "phase_violation"}:
            text = data.get("text") or data.get("message") or ""
            lines.append(f"[{seq}] {kind}: {first_line(str(text), 300)}")
        elif kind == "final_answer":
            lines.append(f"[{seq}] final answer: {str(data.get('text') or '')[:500]}")
    text = "\n".join(lines)
    if len(text) > TRANSCRIPT_MAX_CHARS:
        head = "\n".join(lines[:2])
        text = f"{head}\n[... earlier steps left out ...]\n{text[-(TRANSCRIPT_MAX_CHARS - 200) :]}"
    return text


def reflect_with_llm(
    events: list[dict], *, goal: str, outcome: str, config: AgentkitConfig
) -> list[LessonDraft] | None:
    """Lessons from the auxiliary model, or None when it failed (the caller falls back)."""
    try:
        return asyncio.run(_reflect(events, goal=goal, outcome=outcome, config=config))
    except LLMError as exc:
        log.warning("the LLM reflector failed (%s); the rule-based one writes the lessons", exc)
        return None


async def _reflect(
    events: list[dict], *, goal: str, outcome: str, config: AgentkitConfig
) -> list[LessonDraft] | None:
    text = transcript(events, goal=goal, outcome=outcome)
    messages = [Message("user", f"Write the lessons of this run.\n\n{text}")]
    async with Gateway(config) as gateway:
        alias = gateway.auxiliary_alias
        for _attempt in range(ATTEMPTS):
            request = ChatRequest(
                tuple(messages),
                (TextBlock(SYSTEM),),
                max_tokens=1024,
                structured=LESSONS_OUTPUT,
            )
            reply = await gateway.complete(request, model=alias)
            answer = reply.structured_text(LESSONS_OUTPUT.name)
            lessons, problem = _parse(answer, outcome)
            if lessons is not None:
                return lessons
            call = next((c for c in reply.tool_calls if c.name == LESSONS_OUTPUT.name), None)
            retry = f"That answer is invalid ({problem}). Answer again with the JSON object only."
            if call is None:
                messages += [Message("assistant", reply.content), Message("user", retry)]
            else:
                messages += [
                    Message("assistant", reply.content, (call,)),
                    Message("tool", retry, (), call.id, call.name, True),
                ]
    log.warning("the LLM reflector gave no valid lessons in %d tries", ATTEMPTS)
    return None


def _parse(answer: str, outcome: str) -> tuple[list[LessonDraft] | None, str]:
    start, end = answer.find("{"), answer.rfind("}")
    if start < 0 or end < start:
        return None, "no JSON object"
    try:
        parsed = _Lessons.model_validate(json.loads(answer[start : end + 1]))
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()[:5]
        ]
        return None, "; ".join(problems)
    except ValueError as exc:
        return None, f"the JSON does not parse: {first_line(str(exc), 200)}"
    success = outcome == "completed"
    drafts = [
        LessonDraft(lesson.category, lesson.trigger.strip(), lesson.advice.strip())
        for lesson in parsed.lessons
        # a success teaches what worked; a failure, what went wrong
        if (lesson.category == Category.SUCCESS_PATTERN) == success
    ]
    return drafts, ""
