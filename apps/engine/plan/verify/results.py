"""What a verification reports: one `CommandOutcome` per command, and the `VerificationResult`
the model, the engine's Verifier port and the chat's verification card each read their way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from apps.engine.ports import VerificationOutcome


@dataclass(frozen=True)
class CommandOutcome:
    command: str  # as configured or declared, e.g. "pytest -x -q"
    passed: bool
    exit_code: int
    timed_out: bool
    duration: float
    output: str  # stdout + stderr, capped
    errors: tuple[str, ...] = ()  # condensed, for the model
    note: str = ""  # e.g. "no tests collected"
    error_code: str = ""  # failed: memory_limit | command_timeout | command_failed

    @classmethod
    def not_run(cls, command: str, timeout_seconds: float) -> CommandOutcome:
        """A command the verification's budget left no time for."""
        error = (
            f"`{command}` did not run: verification.timeout_seconds ({timeout_seconds:g} s) was "
            "used up by the commands before it"
        )
        return cls(command, False, -1, True, 0.0, "", (error,), error_code="command_timeout")

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "duration": round(self.duration, 3),
            "error_code": self.error_code,
            "errors": list(self.errors),
            "exit_code": self.exit_code,
            "note": self.note,
            "output": self.output,
            "passed": self.passed,
            "timed_out": self.timed_out,
        }


@dataclass(frozen=True)
class VerificationResult:
    passed: bool
    errors: tuple[str, ...]  # what the model sees: one condensed entry per failed command
    log: str  # every command with its full (capped) output
    commands: tuple[CommandOutcome, ...]
    duration: float
    kind: Literal["python", "spec", "none"] = "none"
    summary: str = ""  # one line for humans and the UI card
    backend: str = ""

    def error_summary(self) -> str:
        """The text to re-inject as a user message after a failed verification."""
        if self.passed:
            return f"Verification passed: {self.summary}"
        ran = ", ".join(
            f"`{c.command}` ({'passed' if c.passed else 'failed'})" for c in self.commands
        )
        lines = [
            "Verification failed: your work is not done until these checks pass.",
            f"Ran in the workspace (sandboxed, network off): {ran or 'nothing'}.",
            "",
        ]
        for index, error in enumerate(self.errors, 1):
            lines += [f"{index}. {error}", ""]
        lines.append(
            "Fix the cause (not the tests, unless they are wrong), re-run the checks with the "
            "run_tests tool, then give your final answer."
        )
        return "\n".join(lines)

    def as_outcome(self) -> VerificationOutcome:
        """What the engine's `Verifier` port returns (apps/engine/ports.py)."""
        return VerificationOutcome(
            passed=self.passed,
            errors=self.errors,
            log=self.log,
            commands=tuple(outcome.command for outcome in self.commands),
            summary=self.summary,
        )

    def as_event_data(self) -> dict[str, Any]:
        """JSON-safe payload for the `verification_result` event (the chat's verification card)."""
        return {
            "backend": self.backend,
            "commands": [outcome.as_dict() for outcome in self.commands],
            "duration": round(self.duration, 3),
            "errors": list(self.errors),
            "kind": self.kind,
            "passed": self.passed,
            "summary": self.summary,
        }
