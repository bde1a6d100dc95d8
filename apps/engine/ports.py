"""What the engine needs from outside, as small protocols the Django side (or a test) implements.

- `ModelClient`: streams a completion. `apps.engine.llm.gateway.Gateway` is one.
- `Verifier`: `async (final_answer) -> VerificationOutcome`; the runner adapts the sandboxed
  verifier (apps/engine/plan/verify/run.py) to it.
- `Salvager`: what a run that ended in Emergency changed (the runner asks git).
- `TaskHooks`: lifecycle hooks, exactly one of which fires once at the end of every run.
- `CheckpointStore`: where a team_collab run (orchestrator.py) saves each finished phase of its
  spec and, resumed after a restart, loads them back (`apps.specs` stores them as rows).
- `ReviewGate`: stores a task's spec revisions and the person's decision on each (apps/specs
  implements it on the database, so the decision may come from any process).

Events need no port: `ReActEngine.run()` yields them and the runner (apps/tasks/run/runner.py) is the
one place that persists and broadcasts them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from apps.engine.llm.types import ChatRequest, StreamDelta
from apps.engine.plan.spec import SpecDraft
from apps.engine.task import TaskResult

log = logging.getLogger(__name__)


class ModelClient(Protocol):
    def stream(
        self, request: ChatRequest, *, model: str | None = None
    ) -> AsyncIterator[StreamDelta]:
        """Text deltas as they arrive; the last item carries the complete `response`."""
        ...


@dataclass(frozen=True, slots=True)
class VerificationOutcome:
    passed: bool
    errors: tuple[str, ...] = ()  # what failed, in words the model can act on
    log: str = ""  # the full output, kept in the verification log
    commands: tuple[str, ...] = ()  # what ran, for people (the chat's verification card)
    summary: str = ""  # one line for people


Verifier = Callable[[str], Awaitable[VerificationOutcome]]

# Emergency: what a failed run changed in its workspace. Given the editor's diffs of the run
# ([{"path", "diff"}]), returns {"source": "git"|"editor", "diff", "files"} or None (nothing).
Salvager = Callable[[list[dict[str, str]]], Awaitable[dict | None]]


class TaskHooks:
    """Subclass and override what you need. Exactly one hook fires, once, when a run ends —
    whatever the path: answer, failure, engine exception, cancellation, limits, or a consumer
    that closed the event stream early (cancelled). A hook that raises is logged and ignored:
    it cannot change the outcome of the run."""

    async def on_task_complete(self, result: TaskResult) -> None:
        return None

    async def on_task_failed(self, result: TaskResult) -> None:
        return None

    async def on_task_cancelled(self, result: TaskResult) -> None:
        return None

    async def on_task_parked(self, result: TaskResult) -> None:
        """The spec review timed out: the task waits, parked, for a later decision."""
        return None


async def fire_hook(hooks: TaskHooks, result: TaskResult) -> None:
    """The one hook for how the run ended (a run that gave up is a failure for whoever learns
    from outcomes, seed 000 KTD-8). A hook that raises is logged: it cannot change the outcome."""
    hook = {
        "completed": hooks.on_task_complete,
        "failed": hooks.on_task_failed,
        "cancelled": hooks.on_task_cancelled,
        "gave_up_after_reflections": hooks.on_task_failed,
        "parked": hooks.on_task_parked,
    }[result.status]
    try:
        await hook(result)
    except Exception:
        log.exception("%s raised for task %s", hook.__name__, result.task_id)


# ── the spec review gate (apps/engine/plan/spec_stage.py) ────────────────────────────────────────────
@dataclass(frozen=True, slots=True)
class StoredSpec:
    spec_id: int
    revision: int
    status: str  # draft, pending_review, confirmed, rejected, parked, executing, done, failed
    draft: SpecDraft
    feedback: str = ""  # a rejected revision: what the reviewer asked for


@dataclass(frozen=True, slots=True)
class ReviewDecision:
    decision: str  # confirmed, rejected, timed_out, cancelled
    feedback: str = ""


class ReviewGate(Protocol):
    """One task's specs and their reviews. Every method is safe to call from the event loop
    (the implementation runs its I/O off the loop)."""

    async def latest(self) -> StoredSpec | None:
        """The task's newest revision (a continuation run starts from it), or None."""
        ...

    async def store(self, draft: SpecDraft) -> StoredSpec:
        """Store `draft` as the task's next revision (status draft)."""
        ...

    async def open(self, spec_id: int) -> str:
        """Request a person's review of the spec: its review id; task awaiting_review."""
        ...

    async def wait(self, review_id: str, timeout: float) -> ReviewDecision | None:
        """The person's decision, or None when `timeout` seconds pass without one. Must see a
        decision given in any process (poll the store at a bounded interval)."""
        ...

    async def close(self, review_id: str, decision: str) -> ReviewDecision:
        """Resolve a still pending review as `decision` (timed_out, cancelled); returns the
        decision that holds — a person's, when theirs came first."""
        ...

    async def set_status(self, spec_id: int, status: str) -> None:
        """Move the spec (and the task where it follows) to `status`: parked, executing..."""
        ...


@dataclass(frozen=True, slots=True)
class PhaseCheckpoint:
    """A spec phase that ended: `status` completed, failed or rolled_back; `counters` what a
    resumed run needs (steps, usage, cost, the phase's final answer and plan_exec counters);
    `snapshot_ref` the @snapshot commit taken before it, if any."""

    phase_id: str
    status: str
    counters: dict[str, Any] = field(default_factory=dict)
    snapshot_ref: str = ""


class CheckpointStore(Protocol):
    """The checkpoints of one task's spec."""

    async def save(self, checkpoint: PhaseCheckpoint) -> None: ...

    async def load(self) -> list[PhaseCheckpoint]:
        """Saved checkpoints, oldest first (a phase saved twice: the last one counts)."""
        ...
