"""Deterministic loop detection on what the agent did and what it saw.

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

Recording a step costs the same however long the run is: actions and observations are compared
as text (the strings the conversation holds anyway, equal or not, no hashing), the runs of equal
entries that end at the newest one are counted as entries arrive, and the alternation window is
only walked when the entry two steps back has the newest one's outcome.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from apps.engine.config import LoopDetectionConfig
from apps.engine.llm.types import ToolCall, sorted_arguments

Pattern = Literal["repeat", "error_repeat", "alternation", "monologue"]


@dataclass(frozen=True, slots=True)
class LoopVerdict:
    pattern: Pattern
    fatal: bool
    message: str  # tells the model what it is doing and what to do instead


@dataclass(slots=True)  # not frozen: one is made every step, and nothing changes it
class _Entry:
    action: str | None  # the action's canonical text; None: a reply without action
    outcome: tuple[str, str] | None  # (action, observation); None: a reply without action
    error: bool

    @property
    def summary(self) -> str:
        return _shorten(self.action or "")


_NO_ACTION = _Entry(None, None, False)


def _shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class LoopDetector:
    def __init__(self, config: LoopDetectionConfig | None = None):
        self.config = cfg = config or LoopDetectionConfig()
        # The thresholds record() reads every step, as plain attributes: a read of a pydantic
        # model's field goes through its __getattr__ hook, several times the cost of a plain one
        # (the config is frozen, so these stay its values).
        self._enabled, self._alternation = cfg.enabled, cfg.alternation_window
        self._repeats, self._errors = cfg.repeat_threshold, cfg.error_threshold
        size = max(cfg.repeat_threshold, cfg.error_threshold, cfg.alternation_window,
                   cfg.monologue_threshold)  # fmt: skip
        self._window: deque[_Entry] = deque(maxlen=size)
        self._warned = False
        # Lengths of the runs that end at the newest entry: same outcome, same failing action,
        # no action. They count entries since the last reset, so a run as long as a threshold
        # is exactly "the last `threshold` entries of the window are alike".
        self._same_outcome = self._same_failure = self._no_action = 0

    def reset(self) -> None:
        self._window.clear()
        self._warned = False
        self._same_outcome = self._same_failure = self._no_action = 0

    def record(
        self, action: str | None, observation: str = "", *, error: bool = False
    ) -> LoopVerdict | None:
        """Record one step; returns a verdict when the recent steps form a loop."""
        if not self._enabled:
            return None
        window = self._window
        previous = window[-1] if window else None
        if action is None:
            entry = _NO_ACTION
            self._no_action += 1
            self._same_outcome = self._same_failure = 0
        else:
            outcome = (action, observation)
            entry = _Entry(action, outcome, error)
            self._no_action = 0
            alike = previous is not None and previous.outcome == outcome
            self._same_outcome = self._same_outcome + 1 if alike else 1
            repeated = previous is not None and previous.error and previous.action == action
            self._same_failure = (self._same_failure + 1 if repeated else 1) if error else 0
        window.append(entry)
        if (  # the usual step, ruled out at once: _find() would say the same
            action is not None
            and self._same_outcome < self._repeats
            and self._same_failure < self._errors
            and self._alternation >= 3
            and (len(window) < self._alternation or window[-3].outcome != outcome)
        ):
            self._warned = False
            return None
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
        window = self._window
        last = window[-1]
        if last.action is not None:
            if self._same_outcome >= cfg.repeat_threshold:
                return "repeat", (
                    f"You have run `{last.summary}` {cfg.repeat_threshold} times in a row and got "
                    "the same result each time. Repeating it will not change anything: try a "
                    "different approach, or give your final answer if you are done."
                )
            if self._same_failure >= cfg.error_threshold:
                return "error_repeat", (
                    f"`{last.summary}` has failed {cfg.error_threshold} times in a row. Read the "
                    "error message, change the arguments or use another tool instead of retrying "
                    "it as it is."
                )
            count = cfg.alternation_window
            # A, B, A, B ...: the entry two back must be the newest one again (cheap to rule out).
            if count >= 3 and (len(window) < count or window[-3].outcome != last.outcome):
                return None
            tail = self._tail(count)
            if tail and self._alternates(tail):
                return "alternation", (
                    f"You are alternating between `{tail[-2].summary}` and `{last.summary}` "
                    f"without progress ({len(tail)} steps). Stop and decide on a different next "
                    "step, or give your final answer."
                )
        elif self._no_action >= cfg.monologue_threshold:
            return "monologue", (
                f"Your last {cfg.monologue_threshold} replies took no action. Call a tool to make "
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
    if len(calls) == 1:  # the usual step: no generator, no join
        call = calls[0]
        arguments = call.raw_arguments if call.arguments_error else sorted_arguments(call)
        return f"{call.name} {arguments}"
    return "; ".join(
        f"{call.name} " + (call.raw_arguments if call.arguments_error else sorted_arguments(call))
        for call in calls
    )
