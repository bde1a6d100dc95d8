"""Deterministic loop detection on hashes of what the agent did and what it saw.

The engine records one entry per step: the action (the step's tool calls as canonical text, or
None for a reply that took no action) and its observation. Four patterns count as a loop:

- repeat        the same action with the same observation `repeat_threshold` times in a row
- error_repeat  the same action ending in an error `error_threshold` times in a row
- alternation   A, B, A, B, ... over `alternation_window` steps (same actions, same observations)
- monologue     `monologue_threshold` replies in a row without any action

Polling a slow process is none of these: its action repeats but its observation changes. The first
detection asks for a recovery (`fatal=False`: tell the model and go on); if the very next step
still shows a loop the verdict is fatal. A step outside any loop ends the warning. `reset()`
forgets everything (after a reflection or a re-injected verification failure).
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from apps.engine.config import LoopDetectionConfig
from apps.engine.llm.types import ToolCall

Pattern = Literal["repeat", "error_repeat", "alternation", "monologue"]


@dataclass(frozen=True, slots=True)
class LoopVerdict:
    pattern: Pattern
    fatal: bool
    message: str  # tells the model what it is doing and what to do instead


@dataclass(frozen=True, slots=True)
class _Entry:
    action: bytes | None  # hash of the action; None: a reply without action
    outcome: bytes  # hash of (action, observation)
    error: bool
    action_text: str  # for messages

    @property
    def summary(self) -> str:
        return _shorten(self.action_text)


def _digest(*parts: str) -> bytes:
    hasher = hashlib.blake2b(digest_size=12)
    for part in parts:
        hasher.update(part.encode("utf-8", "surrogatepass"))
        hasher.update(b"\x00")
    return hasher.digest()


def _shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class LoopDetector:
    def __init__(self, config: LoopDetectionConfig | None = None):
        self.config = config or LoopDetectionConfig()
        size = max(
            self.config.repeat_threshold,
            self.config.error_threshold,
            self.config.alternation_window,
            self.config.monologue_threshold,
        )
        self._window: deque[_Entry] = deque(maxlen=size)
        self._warned = False

    def reset(self) -> None:
        self._window.clear()
        self._warned = False

    def record(
        self, action: str | None, observation: str = "", *, error: bool = False
    ) -> LoopVerdict | None:
        """Record one step; returns a verdict when the recent steps form a loop."""
        if not self.config.enabled:
            return None
        if action is None:
            entry = _Entry(None, _digest("\x01no-action"), False, "")
        else:
            entry = _Entry(_digest(action), _digest(action, observation), error, action)
        self._window.append(entry)
        found = self._find()
        if found is None:
            self._warned = False
            return None
        pattern, message = found
        fatal = self._warned
        self._warned = True
        return LoopVerdict(pattern, fatal, message)

    def _tail(self, count: int) -> list[_Entry] | None:
        window = self._window
        if len(window) < count:
            return None
        return [window[i] for i in range(-count, 0)]

    def _find(self) -> tuple[Pattern, str] | None:
        cfg = self.config
        last = self._window[-1]
        if last.action is not None:
            tail = self._tail(cfg.repeat_threshold)
            if tail and all(e.outcome == last.outcome for e in tail):
                return "repeat", (
                    f"You have run `{last.summary}` {len(tail)} times in a row and got the same "
                    "result each time. Repeating it will not change anything: try a different "
                    "approach, or give your final answer if you are done."
                )
            tail = self._tail(cfg.error_threshold)
            if tail and all(e.action == last.action and e.error for e in tail):
                return "error_repeat", (
                    f"`{last.summary}` has failed {len(tail)} times in a row. Read the error "
                    "message, change the arguments or use another tool instead of retrying it "
                    "as it is."
                )
            tail = self._tail(cfg.alternation_window)
            if tail and self._alternates(tail):
                return "alternation", (
                    f"You are alternating between `{tail[-2].summary}` and `{last.summary}` "
                    f"without progress ({len(tail)} steps). Stop and decide on a different next "
                    "step, or give your final answer."
                )
        else:
            tail = self._tail(cfg.monologue_threshold)
            if tail and all(e.action is None for e in tail):
                return "monologue", (
                    f"Your last {len(tail)} replies took no action. Call a tool to make "
                    "progress, or give your final answer as a complete reply."
                )
        return None

    @staticmethod
    def _alternates(tail: list[_Entry]) -> bool:
        a, b = tail[-2], tail[-1]
        if a.action is None or b.action is None or a.outcome == b.outcome:
            return False
        # Counting back from the newest entry: b, a, b, a, ...
        return all(
            e.outcome == (b.outcome if back % 2 == 0 else a.outcome)
            for back, e in enumerate(reversed(tail))
        )


def describe_calls(calls: Sequence[ToolCall]) -> str:
    """Canonical text of a step's action (sorted keys), for loop detection."""
    return "; ".join(
        f"{call.name} "
        + (
            call.raw_arguments
            if call.arguments_error
            else json.dumps(call.arguments, sort_keys=True)
        )
        for call in calls
    )
