"""What the model is doing while `check_llm --agent` runs: every model call's text as it arrives.

`LiveCalls` sits on the check's model client (agent_check.py, `_OneAlias`) and sees each call's
stream as the engine does — text, reasoning, a retry's restart, the reply — unbatched. It
measures every call (tokens, seconds, tokens/s from the call's start: the prompt's processing
included, as `react.step_wall_seconds` counts it) and, given `write`, shows the text live: up to
SHOW_CHARS characters a call on one line, whitespace folded; past that a line every NOTE_SECONDS
with the tokens so far and the speed, so a slow or rambling model is seen at work, not silent
until its step ends. The engine's events (tool calls, cuts, the answer) still print one line a
step (agent_check.py, `_progress_line`), each with its call's measure."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from apps.engine.llm.cachesim import CHARS_PER_TOKEN
from apps.engine.llm.types import StreamDelta

SHOW_CHARS = 400  # text shown live per model call
NOTE_SECONDS = 10.0  # past SHOW_CHARS: a progress line this often
PREFIX = "  model> "
MARKS = {"text": "[text]", "reasoning": "[thinking]", "call": "[tool call]"}


@dataclass
class Measure:
    """One model call: the output tokens (the server's count, else estimated from the text),
    seconds from the call's start, seconds to its first piece (the prompt's reading: None when
    nothing came), and whether it ended with a reply. `rate`: tokens/s after the first piece."""

    tokens: int
    seconds: float
    first: float | None
    finished: bool

    @property
    def rate(self) -> float:
        return self.tokens / max(self.seconds - (self.first or 0.0), 0.001)

    def __str__(self) -> str:
        approx = "" if self.finished else "about "
        if self.first is None:  # nothing streamed: cut before it, or answered in one piece
            if not self.finished:
                return f"nothing in {self.seconds:.1f} s"
            return f"{self.tokens} tokens in {self.seconds:.1f} s, {self.rate:.1f} tokens/s"
        return (
            f"{approx}{self.tokens} tokens in {self.seconds:.1f} s: the first after "
            f"{self.first:.1f} s, then {self.rate:.1f} tokens/s"
        )


class LiveCalls:
    def __init__(
        self,
        write: Callable[[str], None] | None = None,
        *,
        show_chars: int = SHOW_CHARS,
        note_seconds: float = NOTE_SECONDS,
    ):
        self.write = write
        self.show_chars, self.note_seconds = show_chars, note_seconds
        self.measures: list[Measure] = []
        self.unreported: Measure | None = None  # the last call's measure, not yet in a step line
        self._open = False  # a live line is open (text written, no newline yet)

    async def watch(self, stream: AsyncIterator[StreamDelta]) -> AsyncIterator[StreamDelta]:
        """Pass `stream` through unchanged, measuring it and showing its text."""
        started = time.monotonic()
        chars = shown = 0
        noted = started
        first: float | None = None
        finished = False
        reply_tokens = 0
        last_kind, space = "text", False  # the last piece shown; a space is due before the next
        try:
            async for delta in stream:
                if delta.restart:  # retried: the text so far is void
                    chars = shown = 0
                    self._line("[the call failed and is retried; its text so far is void]")
                elif delta.response is not None:
                    finished = True
                    reply_tokens = delta.response.usage.output_tokens
                else:
                    piece = delta.text or delta.reasoning or delta.call
                    chars += len(piece)
                    if first is None:
                        first = time.monotonic() - started
                    if shown < self.show_chars:
                        kind = "text" if delta.text else "reasoning" if delta.reasoning else "call"
                        space = space or piece[:1].isspace()
                        text = " ".join(piece.split())
                        if kind != last_kind:
                            text, last_kind = f"{MARKS[kind]} {text}".rstrip(), kind
                            space = True  # a mark stands apart from what came before
                        if text:
                            text = (" " if space and shown else "") + text
                            text = text[: self.show_chars - shown]
                            shown += len(text)
                            self._show(text + ("…" if shown >= self.show_chars else ""))
                        space = piece[-1:].isspace()
                    elif (now := time.monotonic()) - noted >= self.note_seconds:
                        noted = now
                        tokens = max(1, chars // CHARS_PER_TOKEN)
                        measure = Measure(tokens, now - started, first, False)
                        self._line(f"… still writing: {measure}")
                yield delta
        finally:
            tokens = reply_tokens or -(-chars // CHARS_PER_TOKEN)
            measure = Measure(tokens, time.monotonic() - started, first, finished)
            self.measures.append(measure)
            self.unreported = measure
            self._end()

    def take(self) -> str:
        """The last call's measure for the step line that follows it, once ("" if none)."""
        measure, self.unreported = self.unreported, None
        return f" ({measure})" if measure is not None else ""

    def _show(self, text: str) -> None:
        if self.write is None or not text:
            return
        if not self._open:
            self._open = True
            text = PREFIX + text.lstrip()
        self.write(text)

    def _line(self, text: str) -> None:
        self._end()
        if self.write is not None:
            self.write(f"{PREFIX}{text}\n")

    def _end(self) -> None:
        if self._open and self.write is not None:
            self.write("\n")
        self._open = False
