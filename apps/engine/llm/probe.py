"""One short prompt to one model alias, measured: what `manage.py check_llm` reports.

Framework-free so the command stays a thin formatter. The alias is called on its own (no
fallbacks: a check must not hide a broken model behind a working one), streamed, with the
configured retries and timeouts.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from apps.engine.llm.errors import LLMError
from apps.engine.llm.gateway import Gateway
from apps.engine.llm.types import ChatRequest, Message, Usage

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
