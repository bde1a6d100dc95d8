"""Server-sent events, without a network: bytes in, events out; deltas in, one response out.

- `SSEDecoder.feed(chunk)` returns the events a chunk of bytes completes, whatever the chunk
  boundaries (a UTF-8 character or a CRLF may be split across chunks); `flush()` at end of input
  discards an unfinished event, as the SSE specification says. Comments (`: ping`) and unknown
  fields are skipped.
- `StreamSnapshot` is the provider-neutral state a streamed answer is folded into. Each provider
  module has a pure `accumulate(event, snapshot) -> str` that applies one event and returns the
  visible text it added. `snapshot.finish()` gives the `ChatResponse`, or raises
  `LLMConnectionError` when the stream stopped before the model finished: a cut stream is never
  returned as a complete answer.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from apps.engine.llm.errors import LLMConnectionError
from apps.engine.llm.types import (
    SYNTHETIC_ID_PREFIX,
    ChatResponse,
    ThinkingBlock,
    ToolCall,
    Usage,
)

log = logging.getLogger(__name__)

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    data: str
    event: str | None = None  # the `event:` field; None means the default type "message"
    id: str | None = None
    retry: int | None = None

    def json(self):
        return json.loads(self.data)


class SSEDecoder:
    """Incremental decoder of a `text/event-stream` body (WHATWG HTML, "Server-sent events").

    Linear in the input: each chunk's new text is scanned once for line ends; the pieces of a
    line still open are kept in a list and joined once, when its end arrives (a 400 KB `data:`
    line fed in 48-byte chunks costs the same per byte as a short one). A CR that ends a chunk
    ends its line at once; an LF first in the next chunk is then the second half of a CRLF.
    """

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._open_line: list[str] = []  # pieces of the line whose end has not arrived
        self._after_cr = False  # the last chunk ended with CR: a leading LF belongs to it
        self._started = False
        self._event: str | None = None
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None

    @property
    def pending(self) -> bool:
        """True while part of an event (or of a line) has arrived without its end."""
        return bool(self._open_line or self._data or self._event is not None)

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        text = self._utf8.decode(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr and text:
            self._after_cr = False
            if text[0] == "\n":
                text = text[1:]
        if not text:
            return []
        if "\r" not in text:  # the usual case: str.split is much faster than a regex walk
            if "\n" not in text:
                self._open_line.append(text)
                return []
            lines = text.split("\n")
            rest = lines.pop()  # after the last line end: incomplete
        else:
            lines, position = [], 0
            for match in _LINE_END.finditer(text):
                lines.append(text[position : match.start()])
                position = match.end()
            rest = text[position:]
            self._after_cr = text.endswith("\r")  # maybe the first half of a CRLF
            if not lines:
                self._open_line.append(rest)
                return []
        if self._open_line:
            self._open_line.append(lines[0])
            lines[0] = "".join(self._open_line)
        self._open_line = [rest] if rest else []
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[ServerSentEvent]:
        """End of input: an unfinished line, and an event without its closing blank line, are
        discarded (they may be cut short)."""
        self._utf8.decode(b"", final=True)
        self._open_line, self._after_cr = [], False
        self._event, self._data = None, []
        return []

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith("data: "):  # fast path for the most common line
            self._data.append(line[6:])
            return None
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._event = None
            return None
        event = ServerSentEvent(
            data="\n".join(self._data), event=self._event, id=self._last_id, retry=self._retry
        )
        self._event, self._data = None, []
        return event


def decode_all(chunks: Iterable[bytes]) -> Iterator[ServerSentEvent]:
    """Every complete event of a finished byte stream (tests, benchmarks, recorded streams)."""
    decoder = SSEDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.flush()


@dataclass(slots=True)
class ToolCallDraft:
    id: str = ""
    name: str = ""
    argument_parts: list[str] = field(default_factory=list)

    def build(self, position: int | str) -> ToolCall:
        return build_tool_call(self.id, self.name, "".join(self.argument_parts), position=position)


def synthetic_tool_call_id(position: int | str) -> str:
    """A unique id for a tool call the model sent without one, marked by its prefix."""
    return f"{SYNTHETIC_ID_PREFIX}{secrets.token_hex(6)}_{position}"


def build_tool_call(
    call_id: str, name: str, raw_arguments: str, *, position: int | str = 0
) -> ToolCall:
    """A ToolCall from the argument text as sent; invalid JSON is kept with a readable error so
    the engine can tell the model exactly what was wrong. A missing id is made up and marked
    (`synthetic_id=True`, `SYNTHETIC_ID_PREFIX`); `position`, the call's index, ends it."""
    synthetic = not call_id
    if synthetic:
        call_id = synthetic_tool_call_id(position)
        log.debug(
            "tool call %r at position %s came without an id; using %s", name, position, call_id
        )
    text = raw_arguments.strip()
    error: str | None = None
    arguments: dict = {}
    if text:
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            error = f"arguments are not valid JSON: {exc.msg} at character {exc.pos}"
        else:
            if isinstance(parsed, dict):
                arguments = parsed
            else:
                error = f"arguments must be a JSON object, got {type(parsed).__name__}"
    return ToolCall(call_id, name, arguments, raw_arguments, error, synthetic)


@dataclass(slots=True)
class ThinkingDraft:
    """An Anthropic `thinking` / `redacted_thinking` block while it streams."""

    kind: str = "thinking"
    parts: list[str] = field(default_factory=list)
    signature: str = ""
    data: str = ""

    def build(self) -> ThinkingBlock:
        if self.kind == "redacted_thinking":
            return ThinkingBlock("redacted_thinking", data=self.data)
        return ThinkingBlock("thinking", thinking="".join(self.parts), signature=self.signature)


@dataclass(slots=True)
class StreamSnapshot:
    """A streamed answer so far. Providers' `accumulate` functions are the only writers."""

    text_parts: list[str] = field(default_factory=list)
    tool_calls: dict[int | str, ToolCallDraft] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str = ""
    response_id: str | None = None
    request_id: str | None = None
    done: bool = False  # the protocol's end marker arrived ([DONE], message_stop)
    events: int = 0
    raw_usage: dict = field(default_factory=dict)  # provider's own usage fields, merged
    # Anthropic: type of each content block by index, so deltas of blocks that did not start as
    # `tool_use` (server-side tools) are not taken for tool-call arguments.
    block_types: dict[int, str] = field(default_factory=dict)
    thinking: dict[int, ThinkingDraft] = field(default_factory=dict)  # by block index
    reasoning_parts: list[str] = field(default_factory=list)
    unsent_reasoning: list[str] = field(default_factory=list)  # not yet given out as a delta
    # tool calls given out as `call` deltas so far: by key, argument parts sent (-1: not named)
    calls_sent: dict[int | str, int] = field(default_factory=dict)

    def take_calls(self) -> str:
        """The tool calls' progress since the last take: a call's name once it is known (a
        line of its own), then its argument text as it grows."""
        pieces = []
        for key, draft in self.tool_calls.items():
            sent = self.calls_sent.get(key, -1)
            if sent < 0:
                if not draft.name:
                    continue
                pieces.append(f"\n{draft.name} ")
                sent = 0
            if len(draft.argument_parts) > sent:
                pieces.extend(draft.argument_parts[sent:])
                sent = len(draft.argument_parts)
            self.calls_sent[key] = sent
        return "".join(pieces)

    def add_reasoning(self, text: str) -> None:
        """Reasoning text (thinking deltas, `reasoning_content`): kept for the response, and
        held until the provider's read loop gives it out (`take_reasoning`)."""
        if text:
            self.reasoning_parts.append(text)
            self.unsent_reasoning.append(text)

    def take_reasoning(self) -> str:
        text = "".join(self.unsent_reasoning)
        self.unsent_reasoning.clear()
        return text

    def add_text(self, text: str) -> str:
        if text:
            self.text_parts.append(text)
        return text

    def tool(self, key: int | str) -> ToolCallDraft:
        draft = self.tool_calls.get(key)
        if draft is None:
            draft = self.tool_calls[key] = ToolCallDraft()
        return draft

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def finish(self, *, require_done: bool = True) -> ChatResponse:
        """The complete answer. `require_done=False` also accepts a stream that ended cleanly
        after a finish reason but without the end marker (some OpenAI-compatible servers)."""
        finished = self.done or (not require_done and self.finish_reason is not None)
        if not finished:
            raise LLMConnectionError(
                f"the stream ended before the model finished its answer (after {self.events} "
                f"events, {len(self.text)} characters of text); the partial answer was discarded"
            )
        calls = [draft.build(key) for key, draft in sorted(self.tool_calls.items(), key=_order)]
        return ChatResponse(
            content=self.text,
            tool_calls=calls,
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model,
            request_id=self.request_id,
            thinking=tuple(self.thinking[index].build() for index in sorted(self.thinking)),
            reasoning="".join(self.reasoning_parts),
        )


def _order(item: tuple[int | str, ToolCallDraft]):
    key = item[0]
    return (0, key, "") if isinstance(key, int) else (1, 0, key)
