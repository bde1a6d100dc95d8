"""Progress of a batch run on the console: a live bar on a terminal, plain lines otherwise (logs,
CI, pipes). Either way every finished task gets one line."""

from __future__ import annotations

import time

from apps.tasks.batch.outcomes import Outcome
from apps.tasks.batch.spec import TaskSpec

BAR_WIDTH = 24


def outcome_line(outcome: Outcome) -> str:
    steps = f"{outcome.steps} step{'' if outcome.steps == 1 else 's'}"
    parts = [outcome.status, steps, f"{outcome.tokens} tokens"]
    if outcome.duration_s is not None:
        parts.append(f"{outcome.duration_s:.1f} s")
    if outcome.expectation_met is not None:
        parts.append("as expected" if outcome.expectation_met else "NOT as expected")
    return f"{outcome.id}: " + " · ".join(parts)


class ConsoleProgress:
    """`stream` is anything with write(text) and flush(); `live` draws the bar (a terminal)."""

    def __init__(self, stream, total: int, *, live: bool):
        self.stream = stream
        self.total = total
        self.live = live
        self.started = time.monotonic()
        self.done = 0
        self.running: dict[str, int] = {}
        self.failed = 0
        self._bar_shown = False

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _clear(self) -> None:
        if self._bar_shown:
            self._write("\r\033[2K")
            self._bar_shown = False

    def _line(self, text: str) -> None:
        self._clear()
        self._write(f"[{self.done:>{len(str(self.total))}}/{self.total}] {text}\n")
        self.tick()

    def task_started(self, spec: TaskSpec, task_id: int) -> None:
        self.running[spec.id] = task_id
        if not self.live:
            self._line(f"{spec.id}: started as task #{task_id} ({spec.mode})")
        else:
            self.tick()

    def task_finished(self, outcome: Outcome) -> None:
        self.running.pop(outcome.id, None)
        self.done += 1
        if outcome.status != "completed":
            self.failed += 1
        self._line(outcome_line(outcome))

    def interrupted(self, running: int) -> None:
        self._line(
            f"interrupted: cancelling {running} running task(s), starting no more; "
            "Ctrl-C again to stop without waiting"
        )

    def tick(self) -> None:
        if not self.live:
            return
        filled = round(BAR_WIDTH * self.done / self.total) if self.total else BAR_WIDTH
        bar = "█" * filled + "░" * (BAR_WIDTH - filled)
        names = ", ".join(list(self.running)[:3]) + ("…" if len(self.running) > 3 else "")
        running = f" · running {len(self.running)}: {names}" if self.running else ""
        not_ok = f" · {self.failed} not completed" if self.failed else ""
        elapsed = time.monotonic() - self.started
        self._write(f"\r\033[2K[{bar}] {self.done}/{self.total}{not_ok}{running} · {elapsed:.0f} s")
        self._bar_shown = True

    def close(self) -> None:
        self._clear()
