"""The loop's control-flow signals: raised inside a step, handled only in ReActEngine's loop
(Redirect in its step loop, `_steps`; Finished in run())."""

from __future__ import annotations

from typing import ClassVar

from apps.engine.events import ErrorStruct, FinalStatus
from apps.engine.llm.types import Message


class InterruptAgentFlow(Exception):
    """Raised inside a step to change the course of the run; handled only in the loop."""


class Redirect(InterruptAgentFlow):
    """Tell the model something (verification errors, a loop warning) and take another step."""

    def __init__(self, *messages: Message):
        super().__init__(*(m.content for m in messages))
        self.messages = messages


class Finished(InterruptAgentFlow):
    status: ClassVar[FinalStatus]

    def __init__(
        self, final: str = "", error: ErrorStruct | None = None, cause: BaseException | None = None
    ):
        super().__init__(error.message if error else final)
        self.final = final
        self.error = error
        self.cause = cause  # the exception behind a failure (an LLM error, a crash), if any


class Submitted(Finished):
    status = "completed"


class Failed(Finished):
    status = "failed"


class Cancelled(Finished):
    status = "cancelled"


class GaveUp(Finished):
    status = "gave_up_after_reflections"


class Parked(Finished):
    """No decision on the spec within spec_review.timeout_seconds: the run ends, not failed."""

    status = "parked"


# Kinds of failure, so the Emergency tier (fallback.py) classifies by exception type.
class TimedOut(Failed):
    """The run's wall-time limit (react.max_wall_seconds) passed."""


class LoopStopped(Failed):
    """The loop detector stopped the run after its warning."""


class RunawayStopped(Failed):
    """A second reply of the run was cut as runaway (loop/runaway.py)."""


class OutOfSteps(Failed):
    """react.max_steps were used without an accepted final answer."""


class VerificationFailed(Failed):
    """The final answer failed verification and no re-injection was left."""


class SandboxMissing(Failed):
    """Verification could not run: no sandbox backend works here."""
