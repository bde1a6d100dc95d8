"""Context compression: keep a long run inside the model's window without losing its thread.

When the prompt (system + tools + messages, estimated at 4 characters a token) passes
`compression.threshold_tokens` (default: half the model's context_window), the conversation is cut
in three: the first `keep_first` messages (the goal) and the last `keep_last` messages stay as
they are; the middle is replaced by one message holding a structured summary (goal, decisions,
files changed, tests and their state, open items) written from the middle's full content.
The summary goes right after the kept first messages, that is after the cached prefix (tools,
stable system block, first messages): the stable block's cache survives a compression, and the
next step reads the new prefix the compressing step wrote. A tool call is never separated from
its tool result: the cut points move so that both sides stay whole.

Who writes the summary (seed 001 U1, KTD1 — routing is the compressor's, the gateway's own
per-model fallbacks are untouched): `llm.auxiliary_model` first; an exception or an empty or
whitespace answer → the main model; both fail → a deterministic summary made here from the
messages. Summarizer calls carry no cache breakpoint. The engine emits a `compression` event with
tokens before/after, who wrote the summary and why earlier tiers failed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from apps.engine.config import AgentkitConfig, CompressionConfig
from apps.engine.llm.cachesim import CHARS_PER_TOKEN
from apps.engine.llm.types import (
    ChatRequest,
    ChatResponse,
    Message,
    TextBlock,
    ToolSpec,
    Usage,
    sorted_arguments,
)

log = logging.getLogger(__name__)

SUMMARY_PREFIX = "[Summary of earlier work in this task"
NOTE_OVERHEAD_TOKENS = 64  # the summary message's own header, in tokens (generous)
DETERMINISTIC = "deterministic"
AUDIT = {"agent": "compressor", "task_type": "summarization"}
SECTIONS = ("Goal", "Decisions", "Files changed", "Tests and their state", "Open items")
SUMMARIZER_INSTRUCTIONS = (
    "You compress the middle of an agent's working session so the agent can continue without "
    "it. Write a faithful, specific summary under exactly these headings: "
    + ", ".join(f"'## {name}'" for name in SECTIONS)
    + ". Keep file paths, function names, commands, error messages and test names verbatim. "
    "Say which tests pass and which fail. Do not invent anything; write 'none' for an empty "
    "section. Answer with the summary only."
)
EDIT_TOOLS = ("str_replace_editor",)
TEST_WORDS = ("pytest", "run_tests", "ruff", "npm test", "go test", "cargo test")


class Summarizer(Protocol):
    """A model client that answers a whole request at once (the Gateway is one)."""

    async def complete(self, request: ChatRequest, *, model: str | None = None) -> ChatResponse: ...


@dataclass(slots=True)
class Compression:
    messages: list[Message]
    tokens_before: int
    tokens_after: int
    summarized_by: str  # the model alias that wrote the summary, or "deterministic"
    messages_summarized: int
    kept_first: int
    kept_last: int
    failures: list[str] = field(default_factory=list)  # why earlier tiers were not used
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    llm_calls: int = 0

    def event_data(self) -> dict[str, Any]:
        return {
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summarized_by": self.summarized_by,
            "messages_summarized": self.messages_summarized,
            "kept_first": self.kept_first,
            "kept_last": self.kept_last,
            "failures": self.failures,
            **AUDIT,
        }


def message_chars(message: Message) -> int:
    size = len(message.content) + len(message.role)
    for call in message.tool_calls:
        size += len(call.name) + len(sorted_arguments(call))
    return size


def estimate_prompt_chars(
    messages: Sequence[Message],
    system: Sequence[TextBlock] = (),
    tools: Sequence[ToolSpec] = (),
) -> int:
    chars = sum(len(block.text) for block in system)
    chars += sum(len(t.name) + len(t.description) + len(json.dumps(t.input_schema)) for t in tools)
    return chars + sum(message_chars(m) for m in messages)


def estimate_prompt_tokens(
    messages: Sequence[Message],
    system: Sequence[TextBlock] = (),
    tools: Sequence[ToolSpec] = (),
) -> int:
    chars = estimate_prompt_chars(messages, system, tools)
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


_UNSET = object()


class PromptSize:
    """estimate_prompt_tokens of a run's prompt, kept up to date at the cost of what was added:
    the system blocks and tools are measured once, each message once. The run's messages only
    grow between compressions, which put a new list in their place; another list, or a list
    whose counted part changed its length or last message, is measured again from the start."""

    __slots__ = ("_chars", "_counted", "_fixed", "_last", "_messages", "_system", "_tools")

    def __init__(self) -> None:
        self._system: object = _UNSET  # what the fixed part was measured for
        self._tools: object = _UNSET
        self._fixed = 0
        self._messages: list[Message] | None = None
        self._counted, self._chars, self._last = 0, 0, None

    def tokens(
        self, messages: list[Message], system: Sequence[TextBlock], tools: Sequence[ToolSpec]
    ) -> int:
        if system is not self._system or tools is not self._tools:
            self._system, self._tools = system, tools
            self._fixed = estimate_prompt_chars((), system, tools)
        counted, length = self._counted, len(messages)
        if (
            messages is not self._messages
            or length < counted
            or (counted and messages[counted - 1] is not self._last)
        ):
            self._messages, counted, self._chars = messages, 0, 0
        if length > counted:
            chars = self._chars
            for message in messages[counted:]:  # the messages appended since (a step: two)
                chars += message_chars(message)
            self._chars, self._counted, self._last = chars, length, messages[-1]
        return (self._fixed + self._chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def split_points(messages: Sequence[Message], keep_first: int, keep_last: int) -> tuple[int, int]:
    """(head_end, tail_start): messages[head_end:tail_start] is the middle to summarize. Tool
    results stay with the assistant message that called them, on whichever side it is."""
    n = len(messages)
    head_end = min(keep_first, n)
    while head_end < n and messages[head_end].role == "tool":
        head_end += 1
    tail_start = max(head_end, n - keep_last)
    while tail_start > head_end and messages[tail_start].role == "tool":
        tail_start -= 1
    return head_end, tail_start


def render_transcript(messages: Sequence[Message], limit: int) -> str:
    """The middle in full (calls with their arguments, results with their output), cut to head
    and tail of `limit` characters when longer."""
    parts = []
    for message in messages:
        if message.role == "tool":
            status = "error" if message.is_error else "ok"
            parts.append(f"### tool result ({message.name or 'tool'}, {status})\n{message.content}")
            continue
        text = message.content
        for call in message.tool_calls:
            args = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False)
            text += f"\n-> call {call.name} {args}"
        parts.append(f"### {message.role}\n{text.strip()}")
    transcript = "\n\n".join(parts)
    if len(transcript) <= limit:
        return transcript
    half = limit // 2
    cut = len(transcript) - 2 * half
    return f"{transcript[:half]}\n\n[... {cut} characters left out ...]\n\n{transcript[-half:]}"


def deterministic_summary(messages: Sequence[Message], goal: str = "") -> str:
    """The last tier: a summary built from the messages alone, no model involved."""
    decisions, files, tests, open_items, earlier = [], [], [], [], []
    pending: dict[str, str] = {}
    for message in messages:
        if message.role == "user" and message.content.startswith(SUMMARY_PREFIX):
            earlier.append(message.content.split("\n", 1)[-1].strip()[:2000])
            continue
        if message.role == "assistant":
            first = message.content.strip().splitlines()[0] if message.content.strip() else ""
            if first:
                decisions.append(first[:200])
            for call in message.tool_calls:
                path = call.arguments.get("path")
                if call.name in EDIT_TOOLS and isinstance(path, str) and path not in files:
                    files.append(path)
                described = f"{call.name} {json.dumps(call.arguments, sort_keys=True)}"[:160]
                pending[call.id] = described
        elif message.role == "tool":
            described = pending.pop(message.tool_call_id or "", message.name or "tool")
            outcome = "failed" if message.is_error else "ok"
            first = message.content.strip().splitlines()[0][:160] if message.content.strip() else ""
            if any(word in described for word in TEST_WORDS):
                tests.append(f"{described} -> {outcome}: {first}")
            if message.is_error:
                open_items.append(f"{described} -> {first}")
        elif message.role == "user" and not goal:
            goal = message.content.strip()[:500]

    def section(items: list[str], last: int = 12) -> str:
        return "\n".join(f"- {item}" for item in items[-last:]) or "none"

    return "\n\n".join(
        [f"## Earlier summary\n{text}" for text in earlier[-1:]]
        + [
            f"## Goal\n{goal or 'see the first message'}",
            f"## Decisions\n{section(decisions)}",
            f"## Files changed\n{section(files, 50)}",
            f"## Tests and their state\n{section(tests)}",
            f"## Open items\n{section(open_items[-5:])}",
        ]
    )


class Compressor:
    def __init__(
        self,
        client: Summarizer,
        config: CompressionConfig | None = None,
        *,
        main_model: str = "main",
        auxiliary_model: str | None = None,
        context_window: int = 128_000,
        context_windows: dict[str, int] | None = None,
    ):
        """`context_windows`: alias -> window, for runs on another alias than `main_model`."""
        self.client = client
        self.config = config or CompressionConfig()
        self.main_model = main_model
        self.auxiliary_model = auxiliary_model
        self.context_window = context_window
        self.context_windows = dict(context_windows or {})

    @classmethod
    def from_config(cls, client: Any, config: AgentkitConfig) -> Compressor | None:
        """The compressor a run uses, or None when compression is off or `client` cannot answer
        a whole request (a stream-only test double)."""
        if not config.compression.enabled or not hasattr(client, "complete"):
            return None
        main = config.llm.main
        window = config.models[main].context_window if main in config.models else 128_000
        return cls(
            client,
            config.compression,
            main_model=main,
            auxiliary_model=config.llm.auxiliary_model,
            context_window=window,
            context_windows={alias: m.context_window for alias, m in config.models.items()},
        )

    @property
    def threshold(self) -> int:
        return self.threshold_for(None)

    def threshold_for(self, model: str | None) -> int:
        """compression.threshold_tokens, else half the context window of the run's model."""
        window = self.context_windows.get(model or self.main_model, self.context_window)
        return self.config.threshold_tokens or window // 2

    async def compress_if_needed(
        self,
        messages: Sequence[Message],
        *,
        system: Sequence[TextBlock] = (),
        tools: Sequence[ToolSpec] = (),
        model: str | None = None,
        goal: str | None = None,
        size: PromptSize | None = None,
        force: bool = False,
    ) -> Compression | None:
        """A compressed conversation when the prompt is over the threshold and there is a middle
        to summarize that is larger than a summary may be; else None (the messages stay as they are). `goal`: the run's request; when
        earlier conversation turns fill the kept first messages and the request itself falls in
        the middle, it is repeated verbatim after the summary. `size`: the run's PromptSize
        (the same figure as estimate_prompt_tokens, without measuring the whole prompt again)."""
        if size is not None:
            before = size.tokens(messages, system, tools)
        else:
            before = estimate_prompt_tokens(messages, system, tools)
        if before <= self.threshold_for(model) and not force:  # force: the server said too long
            return None
        head_end, tail_start = split_points(messages, self.config.keep_first, self.config.keep_last)
        middle = list(messages[head_end:tail_start])
        # A summary may take up to summary_max_tokens: a smaller middle is not worth replacing.
        worth = self.config.summary_max_tokens + NOTE_OVERHEAD_TOKENS
        if len(middle) < 2 or estimate_prompt_tokens(middle) <= worth:
            return None
        request_in_middle = goal is not None and any(
            m.role == "user" and m.content == goal for m in middle
        )
        if goal is None:
            goal = next((m.content for m in messages[:head_end] if m.role == "user"), "")
        outcome = Compression(
            messages=[],
            tokens_before=before,
            tokens_after=0,
            summarized_by=DETERMINISTIC,
            messages_summarized=len(middle),
            kept_first=head_end,
            kept_last=len(messages) - tail_start,
        )
        summary = await self.summarize(middle, goal=goal, model=model, outcome=outcome)
        note = Message(
            "user",
            f"{SUMMARY_PREFIX}: {len(middle)} messages replaced by this summary, "
            f"written by {outcome.summarized_by}]\n\n{summary}"
            + (f"\n\n## The current request (verbatim)\n{goal}" if request_in_middle else ""),
        )
        outcome.messages = [*messages[:head_end], note, *messages[tail_start:]]
        outcome.tokens_after = estimate_prompt_tokens(outcome.messages, system, tools)
        return outcome

    async def summarize(
        self,
        middle: Sequence[Message],
        *,
        goal: str = "",
        model: str | None = None,
        outcome: Compression | None = None,
    ) -> str:
        """Auxiliary model → main model → deterministic. Records who wrote it in `outcome`."""
        outcome = outcome or Compression([], 0, 0, DETERMINISTIC, len(middle), 0, 0)
        main = model or self.main_model
        chain = [main]
        if self.auxiliary_model and self.auxiliary_model != main:
            chain.insert(0, self.auxiliary_model)
        transcript = render_transcript(middle, self.config.summary_input_max_chars)
        request = ChatRequest(
            messages=(
                Message(
                    "user",
                    f"The task's goal: {goal.strip() or '(see the transcript)'}\n\n"
                    f"Transcript to summarize:\n\n{transcript}",
                ),
            ),
            system=(TextBlock(SUMMARIZER_INSTRUCTIONS, cache=False),),  # no prompt caching
            max_tokens=self.config.summary_max_tokens,
        )
        for alias in chain:
            try:
                response = await self.client.complete(request, model=alias)
            except Exception as exc:  # any failure of this tier: try the next one
                log.warning("summary by %s failed: %s", alias, exc)
                outcome.failures.append(f"{alias}: {type(exc).__name__}: {exc}"[:300])
                continue
            outcome.usage += response.usage
            outcome.cost += response.cost
            outcome.llm_calls += 1
            if response.content and response.content.strip():
                outcome.summarized_by = alias
                return response.content.strip()
            outcome.failures.append(f"{alias}: empty summary")
        outcome.summarized_by = DETERMINISTIC
        return deterministic_summary(middle, goal)
