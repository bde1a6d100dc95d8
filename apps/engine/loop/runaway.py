"""Runaway replies cut short (a model that rambles holds a run for minutes): a per-step wall
limit (`react.step_wall_seconds`, from the call's start, checked as each piece arrives; a
silent server is bounded by `llm.timeout.read` between bytes) and a repetition
guard on the streamed text (`react.repetition_guard`: the same line, or the same stretch of
text, over and over). Either stops the stream; the loop (react.py) keeps what arrived as the
model's reply, tells the model why it was cut, and takes another step — the second cut of a run
ends it (`runaway_output`).

A call that ends without its reply — cut here, stopped by the run's wall time or a cancel, or a
stream broken after text arrived — still counts: `StepWatch.partial` is the reply so far, its
usage estimated from the text (marked `estimated`), so a run that timed out never reads 0 tokens."""

from __future__ import annotations

import time

from apps.engine.events import ErrorStruct
from apps.engine.llm.gateway import estimated_usage
from apps.engine.llm.types import ChatRequest, ChatResponse

SAME_LINES = 8  # this many identical non-empty lines in a row
REPEATS = 4  # a stretch of text this many times in a row at the end
MIN_STRETCH_CHARS = 120  # the repeated part covers at least this many characters in all
MAX_PERIOD = 400  # the longest repeated stretch looked for
CHECK_EVERY = 48  # characters of new text between two checks
MAX_CUTS = 2  # the run ends at the second cut


class Cut(Exception):
    """The stream was cut: `reason` is `rambling` or `too_slow`; `detail` says what was seen."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class StepWatch:
    """One model call's watch: the text so far, its wall clock, the repetition check."""

    __slots__ = ("_checked", "_other", "_parts", "_size", "first", "guard", "limit", "started")

    def __init__(self, limit: float | None, guard: bool = True):
        self.limit = limit
        self.guard = guard
        self.started = time.monotonic()
        self.first: float | None = None  # when the first piece arrived (the prompt was read)
        self._parts: list[str] = []
        self._other: list[str] = []
        self._size = 0
        self._checked = 0

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def arrived(self) -> bool:
        """Whether any text or reasoning of the (current attempt of the) call arrived."""
        return bool(self._parts or self._other)

    def tick(self, reasoning: str = "") -> None:
        """Reasoning or a tool call's text arrived: kept for the usage (not checked for
        repetition); Cut when the step is over its time."""
        if reasoning:
            self._other.append(reasoning)
        now = time.monotonic()
        if self.first is None:
            self.first = now
        if self.limit is not None and now - self.started > self.limit:
            raise self._too_slow()

    def restart(self) -> None:
        """The call is being retried: the text so far is void (the clock runs on)."""
        self._parts.clear()
        self._other.clear()
        self._size = self._checked = 0

    def partial(self, request: ChatRequest) -> ChatResponse:
        """The reply so far as a response whose usage is estimated from the text: the prompt
        sent and the text received (the server's usage block comes only at the end)."""
        reply = ChatResponse(content=self.text, reasoning="".join(self._other))
        reply.usage = estimated_usage(request, reply)
        return reply

    def push(self, text: str) -> None:
        """Add streamed text; raises Cut when it repeats itself or the step is over its time."""
        self._parts.append(text)
        self._size += len(text)
        now = time.monotonic()
        if self.first is None:
            self.first = now
        if self.limit is not None and now - self.started > self.limit:
            raise self._too_slow()
        if self.guard and self._size - self._checked >= CHECK_EVERY:
            self._checked = self._size
            if (seen := repetition(self.text)) is not None:
                raise Cut("rambling", seen)

    def _too_slow(self) -> Cut:
        now = time.monotonic()
        chars = self._size + sum(map(len, self._other))
        tokens = max(1, chars // 4)
        first = (self.first or now) - self.started  # reading the prompt
        rate = tokens / max(now - self.started - first, 0.001)
        return Cut(
            "too_slow",
            f"the reply took over {self.limit:g} s (react.step_wall_seconds): about {tokens} "
            f"tokens in {now - self.started:.0f} s (the first after {first:.0f} s), "
            f"{rate:.1f} tokens/s",
        )


def repetition(text: str) -> str | None:
    """What repeats at the end of `text` — the same line SAME_LINES times, or one stretch of
    text REPEATS times in a row — described in a few words; None when nothing does."""
    lines = text.rstrip("\n").split("\n")
    if len(lines) >= SAME_LINES:
        last = lines[-1].strip()
        tail = [line.strip() for line in lines[-SAME_LINES:]]
        if last and all(line == last for line in tail):
            return f"the line {last[:60]!r} {SAME_LINES} times in a row"
    tail = text[-(REPEATS * MAX_PERIOD) :]
    for period in range(1, min(MAX_PERIOD, len(tail) // REPEATS) + 1):
        if period * REPEATS < MIN_STRETCH_CHARS:
            continue
        piece = tail[-period:]
        if not piece.strip():
            continue
        if tail.endswith(piece * REPEATS):
            return f"the text {piece.strip()[:60]!r} {REPEATS} times in a row"
    return None


def cut_message(cut: Cut) -> str:
    """What the model is told after its reply was cut."""
    if cut.reason == "rambling":
        return (
            f"Your reply was stopped: it kept repeating itself ({cut.detail}). Do not repeat "
            "yourself: call one tool, or give a short final answer."
        )
    return (
        f"Your reply was stopped: {cut.detail}. Be brief: call one tool, or give a short final "
        "answer."
    )


def runaway_error(cut: Cut, *, warning: bool = False) -> ErrorStruct:
    """The error of a cut: the warning after the first (the run goes on), the run's failure at
    the second."""
    what = "kept repeating itself" if cut.reason == "rambling" else "was too slow"
    message = (
        f"The model's reply was cut: it {what} ({cut.detail}); it was told and goes on."
        if warning
        else f"Stopped: the model's reply {what} ({cut.detail}), again after a warning."
    )
    return ErrorStruct(
        error_code="runaway_output",
        message=message,
        suggestions=[
            "Lower models.<alias>.max_tokens, or raise react.step_wall_seconds for a slow model.",
            "Try a stronger model for this task (manage.py check_llm --agent).",
        ],
    )
