"""What a batch task came to (read from its Task row and events) and whether that is what the
file expected."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from apps.tasks import selectors
from apps.tasks.batch.spec import TaskSpec
from apps.tasks.models import Task, TaskEvent

NOT_STARTED = "not_started"  # interrupted before its turn came
OUTCOME_EVENTS = (
    "task_started",
    "task_finished",
    "reflection",
    "phase_rollback_completed",
    "phase_rollback_failed",
)


@dataclass(frozen=True)
class Outcome:
    id: str
    status: str
    task_id: int | None = None
    workspace: str = ""
    mode: str = ""
    model: str = ""
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    verification: list[bool] = field(default_factory=list)  # one per verification, in order
    reflections: int = 0
    rollback: str = "not_run"  # team_collab: completed | failed | not_run (_rollback_result)
    answer: str = ""
    error: dict | None = None
    expected: dict | None = None  # the file's `expect`, as written
    expectation_met: bool | None = None  # None: nothing expected
    mismatches: list[str] = field(default_factory=list)
    # A suite's hidden tests (suites.py): passed | failed | timed_out | not_run; solved: passed.
    hidden_tests: str = "not_run"
    # verified | unverified | no_changes | the failure's error code (GET /api/tasks/<id>)
    outcome: str | None = None
    solved: bool | None = None
    detail: str = ""
    # A task on a repository workspace: its branch and the branch's newest commit ("" else).
    branch: str = ""
    commit: str = ""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def verification_result(self) -> str:
        if not self.verification:
            return "not_run"
        return "passed" if self.verification[-1] else "failed"

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "tokens": self.tokens,
            "verification_result": self.verification_result,
        }


def outcome_of(*, spec: TaskSpec, task_id: int | None) -> Outcome:
    """The outcome of `spec`'s run (task_id None: it never started)."""
    task = Task.objects.select_related("workspace").filter(pk=task_id).first() if task_id else None
    if task is None:
        return _judged(Outcome(id=spec.id, status=NOT_STARTED, mode=spec.mode), spec)
    # One read of the events the outcome needs (a few rows, through the (task, type) index).
    events = list(
        TaskEvent.objects.filter(task=task, type__in=OUTCOME_EVENTS)
        .order_by("seq")
        .values_list("type", "data")
    )
    kinds = [kind for kind, _ in events]
    data = next((data for kind, data in reversed(events) if kind == "task_finished"), None) or {}
    usage = task.usage or {}
    duration = None
    if task.started_at and task.finished_at:
        duration = round((task.finished_at - task.started_at).total_seconds(), 3)
    outcome = Outcome(
        id=spec.id,
        status=task.status,
        task_id=task.pk,
        workspace=task.workspace.name,
        mode=task.mode,
        model=task.model or _started_model(events),
        steps=int(data.get("steps") or 0),
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=int(usage.get("cache_read_tokens") or 0),
        cache_write_tokens=int(usage.get("cache_write_tokens") or 0),
        cost=float(task.cost or 0.0),
        started_at=task.started_at.isoformat() if task.started_at else None,
        finished_at=task.finished_at.isoformat() if task.finished_at else None,
        duration_s=duration,
        verification=[bool(v.get("passed")) for v in data.get("verification") or []],
        reflections=kinds.count("reflection"),
        rollback=_rollback_result(set(kinds)),
        answer=task.result,
        error=task.error,
        branch=task.branch,
        commit=task.commit,
        outcome=selectors.task_outcome(task),
    )
    return _judged(outcome, spec)


def _started_model(events: list[tuple[str, dict]]) -> str:
    """The model alias the run started on (task_started names it when the task has none)."""
    data = next((data for kind, data in events if kind == "task_started"), None) or {}
    return str(data.get("model") or "")


def _rollback_result(kinds: set[str]) -> str:
    """failed: a phase's rollback failed; completed: at least one ran and none failed;
    not_run: no phase was rolled back."""
    if "phase_rollback_failed" in kinds:
        return "failed"
    return "completed" if "phase_rollback_completed" in kinds else "not_run"


def _judged(outcome: Outcome, spec: TaskSpec) -> Outcome:
    expect = spec.expect
    if expect is None:
        return outcome
    mismatches = []
    statuses = expect.statuses()
    if statuses and outcome.status not in statuses:
        mismatches.append(f"status {outcome.status}, expected {' or '.join(statuses)}")
    for fragment in expect.answer_fragments():
        if fragment not in outcome.answer:
            mismatches.append(f"the answer does not contain {fragment!r}")
    if expect.verification and outcome.verification_result != expect.verification:
        mismatches.append(
            f"verification {outcome.verification_result}, expected {expect.verification}"
        )
    codes = expect.error_codes()
    error_code = (outcome.error or {}).get("error_code") or ""
    if codes and error_code not in codes:
        mismatches.append(f"error code {error_code or 'none'}, expected {' or '.join(codes)}")
    if expect.rollback and outcome.rollback != expect.rollback:
        mismatches.append(f"rollback {outcome.rollback}, expected {expect.rollback}")
    if expect.min_reflections is not None and outcome.reflections < expect.min_reflections:
        mismatches.append(
            f"{outcome.reflections} reflections, expected at least {expect.min_reflections}"
        )
    return _replace(
        outcome,
        expected=expect.model_dump(exclude_none=True),
        expectation_met=not mismatches,
        mismatches=mismatches,
    )


def _replace(outcome: Outcome, **changes) -> Outcome:
    from dataclasses import replace

    return replace(outcome, **changes)
