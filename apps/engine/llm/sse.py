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
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from apps.engine.llm.errors import LLMConnectionError
from apps.engine.llm.types import ChatResponse, ToolCall, Usage

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
    """Incremental decoder of a `text/event-stream` body (WHATWG HTML, "Server-sent events")."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._started = False
        self._event: str | None = None
        self._data: list[str] = []
        self._last_id: str | None = None
        self._retry: int | None = None

    @property
    def pending(self) -> bool:
        """True while part of an event (or of a line) has arrived without its end."""
        return bool(self._buffer or self._data or self._event is not None)

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        text = self._utf8.decode(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if not text:
            return []
        buffer = self._buffer + text if self._buffer else text
        events: list[ServerSentEvent] = []
        if "\r" not in buffer:  # the usual case: str.split is much faster than a regex walk
            lines = buffer.split("\n")
            self._buffer = lines.pop()  # after the last line end: incomplete
            for line in lines:
                event = self._line(line)
                if event is not None:
                    events.append(event)
            return events
        position = 0
        end_of_buffer = len(buffer)
        for match in _LINE_END.finditer(buffer):
            if match.end() == end_of_buffer and match.group() == "\r":
                break  # maybe the first half of a CRLF: wait for the next chunk
            event = self._line(buffer[position : match.start()])
            position = match.end()
            if event is not None:
                events.append(event)
        self._buffer = buffer[position:]
        return events

    def flush(self) -> list[ServerSentEvent]:
        """End of input: complete lines still buffered are processed; an event without its
        closing blank line is discarded (it may be cut short)."""
        tail = self._buffer + self._utf8.decode(b"", final=True)
        self._buffer = ""
        events: list[ServerSentEvent] = []
        lines = _LINE_END.split(tail)
        for line in lines[:-1]:  # the last piece has no line end: incomplete, dropped
            event = self._line(line)
            if event is not None:
                events.append(event)
        self._event, self._data = None, []
        return events

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

    def build(self, default_id: str = "") -> ToolCall:
        return build_tool_call(self.id or default_id, self.name, "".join(self.argument_parts))


def build_tool_call(call_id: str, name: str, raw_arguments: str) -> ToolCall:
    """A ToolCall from the argument text as sent; invalid JSON is kept with a readable error so
    the engine can tell the model exactly what was wrong."""
    text = raw_arguments.strip()
    if not text:
        return ToolCall(call_id, name, {}, raw_arguments)
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as exc:
        error = f"arguments are not valid JSON: {exc.msg} at character {exc.pos}"
        return ToolCall(call_id, name, {}, raw_arguments, error)
    if not isinstance(arguments, dict):
        error = f"arguments must be a JSON object, got {type(arguments).__name__}"
        return ToolCall(call_id, name, {}, raw_arguments, error)
    return ToolCall(call_id, name, arguments, raw_arguments)


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
        calls = [
            draft.build(default_id=f"call_{key}")
            for key, draft in sorted(self.tool_calls.items(), key=_order)
        ]
        return ChatResponse(
            content=self.text,
            tool_calls=calls,
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model,
            request_id=self.request_id,
        )


def _order(item: tuple[int | str, ToolCallDraft]):
    key = item[0]
    return (0, key, "") if isinstance(key, int) else (1, 0, key)
