"""The `scripted` provider: a deterministic, offline model that plays a script. A real provider
(streams in chunks, reports usage, simulates the prompt cache), not a mock.

How to get one
--------------
- From agentkit.yaml: `models: {main: {provider: scripted, script: path/to/script.yaml}}`; the
  path resolves against the config file's folder. Without `script`, the shipped demo script
  (apps/engine/llm/scripts/demo.yaml) drives the demo workspace. `chunk_delay_ms` pauses between
  streamed chunks so a demo visibly streams. `Gateway(config)` does the rest.
- In tests: `Gateway.for_script(turns)` (optionally `config=...` to keep other settings, and
  `alias=...` to replace another alias), or `ScriptedProvider(turns)` on its own. The provider
  keeps every request it received in `.requests`; `gateway.provider("main")` returns it.

The script format and its loading: script.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from apps.engine.config import AgentkitConfig, ModelConfig
from apps.engine.llm.cachesim import BreakpointCache, CacheBlock, estimate_tokens
from apps.engine.llm.errors import (
    AuthenticationError,
    ContextWindowError,
    LLMConnectionError,
    LLMError,
    LLMStatusError,
    LLMTimeoutError,
    RateLimitError,
    ScriptExhaustedError,
)
from apps.engine.llm.providers.script import DEMO_SCRIPT, Script, ScriptTurn, clip, load_script
from apps.engine.llm.types import ChatRequest, ChatResponse, Message, StreamDelta, ToolCall, Usage

_CHUNK = re.compile(r"\S+\s*|\s+")


def answered_message(request: ChatRequest) -> Message | None:
    """The message the model is answering: the last user or tool message."""
    for message in reversed(request.messages):
        if message.role in {"user", "tool"}:
            return message
    return None


def tool_name_of(request: ChatRequest, message: Message) -> str | None:
    if message.name:
        return message.name
    for earlier in reversed(request.messages):
        for call in earlier.tool_calls:
            if call.id == message.tool_call_id:
                return call.name
    return None


def turn_applies(turn: ScriptTurn, request: ChatRequest) -> str | None:
    """None when `turn` may answer `request`, else why not (for the exhaustion message)."""
    last = answered_message(request)
    text = last.content if last else ""
    if turn.role is not None and (last is None or last.role != turn.role):
        return f"the last message is not a {turn.role} message"
    if turn.after_tool is not None:
        if last is None or last.role != "tool":
            return f"the last message is not a {turn.after_tool} result"
        if tool_name_of(request, last) != turn.after_tool:
            return f"the last message is not a {turn.after_tool} result"
    if turn.tool_error is not None and (last is None or last.is_error != turn.tool_error):
        return "the tool result's error flag differs"
    if turn.match is not None and not re.search(turn.match, text):
        return f"match {turn.match!r} not found"
    if turn.only_if_offered:
        offered = {tool.name for tool in request.tools}
        missing = [call.name for call in turn.tool_calls if call.name not in offered]
        if missing:
            return f"the request does not offer {', '.join(missing)}"
    return None


def request_blocks(request: ChatRequest) -> list[CacheBlock]:
    """The prompt as the cache sees it: tools, system blocks, messages (Anthropic's order and
    breakpoint rules, see providers/anthropic.py)."""
    blocks = [
        CacheBlock(
            json.dumps(
                {"name": t.name, "description": t.description, "input_schema": t.input_schema},
                sort_keys=True,
            )
        )
        for t in request.tools
    ]
    caching = any(block.cache for block in request.system)
    blocks += [CacheBlock(block.text, block.cache) for block in request.system]
    for message in request.messages:
        text = f"{message.role}: {message.content}"
        if message.tool_calls:
            text += json.dumps(
                [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls],
                sort_keys=True,
            )
        blocks.append(CacheBlock(text))
    if caching and request.messages:
        blocks[-1] = CacheBlock(blocks[-1].text, breakpoint=True)
    return blocks


class ScriptedProvider:
    """Plays a Script. State (which turns were used) lives in the instance; `reset()` rewinds."""

    kind = "scripted"

    def __init__(
        self,
        script: str | Path | Sequence[Any] | dict[str, Any] | Script,
        *,
        alias: str = "main",
        model: ModelConfig | None = None,
        chunk_delay: float = 0.0,
        min_cacheable_tokens: int = 256,
    ):
        self.script = load_script(script)
        self.alias = alias
        self.model = model or ModelConfig(provider="scripted")
        self.chunk_delay = chunk_delay
        self.requests: list[ChatRequest] = []
        self._used: set[int] = set()
        self._cache = BreakpointCache(min_tokens=min_cacheable_tokens)

    @classmethod
    def from_config(cls, alias: str, model: ModelConfig, config: AgentkitConfig):
        path = config.resolve_path(model.script) if model.script else DEMO_SCRIPT
        return cls(path, alias=alias, model=model, chunk_delay=model.chunk_delay_ms / 1000)

    def __repr__(self) -> str:
        return f"<ScriptedProvider {self.alias}: {self.script.source}, {len(self.requests)} calls>"

    @property
    def calls(self) -> int:
        return len(self.requests)

    def reset(self) -> None:
        self.requests.clear()
        self._used.clear()
        self._cache.reset()

    def pick(self, request: ChatRequest, *, consume: bool = True) -> ScriptTurn:
        """The turn that answers `request`; marks it used unless it repeats or `consume` is
        False (the fake server answering with a fault: the retry must get the same turn)."""
        reasons: list[str] = []
        for index, turn in enumerate(self.script.turns):
            if index in self._used:
                reasons.append(f"turn {index + 1} ({turn.describe()}): already used")
                continue
            why_not = turn_applies(turn, request)
            if why_not is None:
                if consume and not turn.repeat:
                    self._used.add(index)
                return turn
            reasons.append(f"turn {index + 1} ({turn.describe()}): {why_not}")
        last = answered_message(request)
        said = f"{last.role} message {clip(last.content, 200)!r}" if last else "no user message"
        raise ScriptExhaustedError(
            f"scripted model {self.alias!r} ran out of script at call {self.calls} "
            f"({self.script.source}). It was answering the {said}.\n"
            + "\n".join(f"  {reason}" for reason in reasons[-8:])
            + "\nExtend the script: add a turn (a text reply or tool_calls) for this call, or a "
            "catch-all turn with `repeat: true` at the end."
        )

    async def generate(self, request: ChatRequest, *, stream: bool) -> AsyncIterator[StreamDelta]:
        self.requests.append(request)
        turn = self.pick(request)
        number = self.calls
        if stream and turn.thinking and turn.fail != "empty":
            for chunk in _CHUNK.findall(turn.thinking):
                await asyncio.sleep(self.chunk_delay)
                yield StreamDelta(reasoning=chunk)
        if stream and turn.text and turn.fail != "empty":
            for chunk in _CHUNK.findall(turn.text):
                await asyncio.sleep(self.chunk_delay)
                yield StreamDelta(text=chunk)
        else:
            await asyncio.sleep(0)
        if turn.fail and turn.fail != "empty":
            raise _failure(turn.fail, self.alias)
        calls = [
            ToolCall(
                call.id or f"call_{number}_{i}",
                call.name,
                dict(call.arguments),
                json.dumps(call.arguments, sort_keys=True, ensure_ascii=False),
            )
            for i, call in enumerate(turn.tool_calls)
        ]
        text = "" if turn.fail == "empty" else turn.text
        yield StreamDelta(
            response=ChatResponse(
                content=text,
                tool_calls=[] if turn.fail == "empty" else calls,
                usage=self._usage(request, turn, text, calls),
                finish_reason=turn.finish_reason or ("tool_calls" if calls else "stop"),
                model=self.model.model,
                request_id=f"scripted-{number}",
                reasoning="" if turn.fail == "empty" else turn.thinking,
            )
        )

    def _usage(
        self, request: ChatRequest, turn: ScriptTurn, text: str, calls: list[ToolCall]
    ) -> Usage:
        if turn.usage is not None:
            return Usage(**turn.usage.model_dump())
        cache = self._cache.account(request_blocks(request))
        output = estimate_tokens(text) + sum(
            estimate_tokens(call.name + call.raw_arguments) for call in calls
        )
        return Usage(
            input_tokens=cache.input_tokens,
            output_tokens=output,
            cache_read_tokens=cache.cache_read_tokens,
            cache_write_tokens=cache.cache_write_tokens,
        )


def _failure(kind: str, alias: str) -> LLMError:
    body = {"error": {"type": kind, "message": f"scripted failure ({kind})"}}
    label = f"{alias} (scripted): "
    if kind == "rate_limit":
        return RateLimitError(429, body, message=f"{label}HTTP 429: scripted", retry_after=0.0)
    if kind == "auth":
        return AuthenticationError(401, body, message=f"{label}HTTP 401: scripted")
    if kind == "context_window":
        return ContextWindowError(400, body, message=f"{label}HTTP 400: scripted prompt too long")
    if kind == "timeout":
        return LLMTimeoutError(f"{label}scripted timeout")
    if kind == "connection":
        return LLMConnectionError(f"{label}scripted connection failure")
    return LLMStatusError(500, body, message=f"{label}HTTP 500: scripted server error")
