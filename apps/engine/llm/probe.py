"""One short prompt to one model alias, measured: what `manage.py check_llm` reports.

Framework-free so the command stays a thin formatter. The alias is called on its own (no
fallbacks: a check must not hide a broken model behind a working one), streamed, with the
configured retries and timeouts.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from apps.engine.llm.errors import LLMError, LLMStatusError, names_capability
from apps.engine.llm.gateway import Gateway
from apps.engine.llm.structured import (
    STEPS,
    StructuredMode,
    memory_key,
    remember_mode,
    remembered_mode,
    structured_mode,
)
from apps.engine.llm.types import ChatRequest, Message, StructuredOutput, Usage

PROBE_PROMPT = "Reply with one short sentence: who are you?"


@dataclass(slots=True)
class ProbeResult:
    alias: str
    provider: str
    model: str
    ok: bool
    content: str = ""
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    attempts: int = 0
    first_token_ms: float | None = None
    latency_ms: float = 0.0
    error: str | None = None
    error_type: str | None = None
    # How this alias gives one JSON object (the planner's path): json_schema | tool | prompt,
    # or "none" when no way gave one (probe_structured)
    structured_output: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["usage"] = self.usage.as_dict()
        return data


async def probe_model(
    gateway: Gateway, alias: str, *, prompt: str = PROBE_PROMPT, max_tokens: int = 200
) -> ProbeResult:
    model = gateway.config.models.get(alias)
    result = ProbeResult(
        alias=alias,
        provider=model.provider if model else "?",
        model=model.model if model else "?",
        ok=False,
    )
    request = ChatRequest(messages=(Message("user", prompt),), max_tokens=max_tokens)
    started = time.perf_counter()
    try:
        async for delta in gateway.stream(request, model=alias, fallbacks=False):
            if delta.restart:
                result.first_token_ms = None
            elif delta.text and result.first_token_ms is None:
                result.first_token_ms = (time.perf_counter() - started) * 1000
            elif delta.response is not None:
                response = delta.response
                result.ok = True
                result.content = response.content
                result.usage = response.usage
                result.cost = response.cost
                result.attempts = response.attempts
                result.model = response.model or result.model
    except LLMError as exc:
        result.error = str(exc)
        result.error_type = type(exc).__name__
    result.latency_ms = (time.perf_counter() - started) * 1000
    if result.ok and result.first_token_ms is None:
        result.first_token_ms = result.latency_ms  # tool-call-only or unstreamed answer
    return result


STRUCTURED_PROMPT = 'Reply with a JSON object {"answer": "..."}: what is the capital of France?'
STRUCTURED_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


async def probe_structured(gateway: Gateway, alias: str) -> str:
    """The way `alias` gives one JSON object, as the planner steps down: its own
    (`structured_output`, or what worked before in this process), then the next ways after a
    refusal that names the feature or a plain 400. Returns the mode that gave a JSON object
    (remembered for the alias, as the planner would), or "none"."""
    model = gateway.config.models.get(alias)
    if model is None:
        return "none"
    own = structured_mode(model)
    first = remembered_mode(memory_key(alias, model)) or own
    for mode in STEPS[STEPS.index(first) :]:
        wanted = StructuredOutput("answer", "The answer.", STRUCTURED_SCHEMA, mode=mode)
        request = ChatRequest(
            (Message("user", STRUCTURED_PROMPT),),
            max_tokens=60,
            structured=None if mode == "prompt" else wanted,
        )
        try:
            reply = await gateway.complete(request, model=alias, fallbacks=False)
        except LLMStatusError as exc:
            if names_capability(exc.body) or exc.status_code == 400:
                continue
            return "none"
        except LLMError:
            return "none"
        if _is_object(reply.structured_text("answer")):
            if mode != own:
                remember_mode(memory_key(alias, model), mode)
            return mode
    return "none"


def _is_object(text: str) -> bool:
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        return False
    try:
        return isinstance(json.loads(body[start : end + 1]), dict)
    except ValueError:
        return False


__all__ = ["ProbeResult", "StructuredMode", "probe_model", "probe_structured"]
