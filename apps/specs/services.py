"""State changes of apps.specs. Keyword-only arguments, named <entity>_<action>.

A review is resolved exactly once: every resolution is a conditional update of a pending row, so a
person's decision and the engine's timeout (or cancellation) cannot both win."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.engine.plan.spec import SpecDraft, parse_spec_review_id, spec_review_id
from apps.specs.checkpoints import spec_stale
from apps.specs.models import PhaseStatus, ReviewDecision, Spec, SpecPhase, SpecReview, SpecStatus
from apps.tasks.errors import ApplicationError
from apps.tasks.models import FINAL_STATUSES, Task, TaskStatus
from apps.tasks.selectors import task_has_rows

MAX_FEEDBACK_CHARS = 8000
DECISIONS = {"confirm": ReviewDecision.CONFIRMED, "reject": ReviewDecision.REJECTED}


@transaction.atomic
def spec_store(*, task_id: int, draft: SpecDraft) -> Spec:
    """The task's next revision of the spec, with its phases; status draft."""
    task = Task.objects.select_for_update().get(pk=task_id)
    latest = Spec.objects.filter(task=task).aggregate(n=Max("revision"))["n"] or 0
    spec = Spec.objects.create(
        task=task,
        workspace_id=task.workspace_id,
        revision=latest + 1,
        goal=draft.goal,
        draft=draft.model_dump(mode="json"),
    )
    SpecPhase.objects.bulk_create(
        SpecPhase(
            spec=spec,
            position=position,
            phase_id=phase.id,
            title=phase.title,
            role=phase.role,
            instructions=phase.instructions,
            depends_on=list(phase.depends_on),
            validation_command=phase.validation_command or "",
            rollback_command=phase.rollback_command or "",
        )
        for position, phase in enumerate(draft.phases)
    )
    return spec


@transaction.atomic
def spec_review_open(*, spec_id: int) -> SpecReview:
    """Request a review of the spec (once per spec): spec pending_review, task awaiting_review."""
    spec = Spec.objects.select_for_update().get(pk=spec_id)
    review, _ = SpecReview.objects.get_or_create(spec=spec, review_id=spec_review_id(spec.pk))
    Spec.objects.filter(pk=spec.pk).update(
        status=SpecStatus.PENDING_REVIEW, updated_at=timezone.now()
    )
    Task.objects.filter(pk=spec.task_id).exclude(status__in=FINAL_STATUSES).update(
        status=TaskStatus.AWAITING_REVIEW
    )
    return review


# What a spec's status means for its task (the task's other statuses come from the runner).
TASK_STATUS_OF = {
    SpecStatus.EXECUTING: TaskStatus.RUNNING,
    SpecStatus.PARKED: TaskStatus.PARKED,
}


def spec_set_status(*, spec_id: int, status: str) -> None:
    with transaction.atomic():
        spec = Spec.objects.select_for_update().get(pk=spec_id)
        Spec.objects.filter(pk=spec.pk).update(status=status, updated_at=timezone.now())
        if status in TASK_STATUS_OF:
            Task.objects.filter(pk=spec.task_id).exclude(status__in=FINAL_STATUSES).update(
                status=TASK_STATUS_OF[status]
            )


def spec_finish_for_task(*, task_id: int, completed: bool) -> None:
    """The run that executed the task's spec ended: the spec is done (its phases completed) or
    failed. A spec still waiting for review when the run ended is failed too."""
    open_statuses = (SpecStatus.EXECUTING, SpecStatus.PENDING_REVIEW, SpecStatus.DRAFT)
    # Most tasks (react, chat) have none: no write transaction, no write lock, no ORM query.
    if not task_has_rows(Spec, task_id=task_id, statuses=tuple(map(str, open_statuses))):
        return
    open_specs = Spec.objects.filter(task_id=task_id, status__in=open_statuses)
    with transaction.atomic():
        for spec in open_specs.select_for_update():
            done = completed and spec.status == SpecStatus.EXECUTING
            spec.status = SpecStatus.DONE if done else SpecStatus.FAILED
            spec.save(update_fields=["status", "updated_at"])
            if done:
                spec.phases.filter(status=PhaseStatus.PENDING).update(status=PhaseStatus.COMPLETED)


def spec_review_close(*, review_id: str, decision: str) -> tuple[str, str]:
    """The engine resolves a pending review (timed_out, cancelled). Returns the (decision,
    feedback) that holds now: a person's, if theirs came first; `decision` for a review whose
    row is gone."""
    SpecReview.objects.filter(review_id=review_id, decision=ReviewDecision.PENDING).update(
        decision=decision, resolved_at=timezone.now()
    )
    row = SpecReview.objects.filter(review_id=review_id).values_list("decision", "feedback")
    return row.first() or (decision, "")


def spec_reviews_close_pending(*, task_id: int) -> list[SpecReview]:
    """Resolve as cancelled every review of the task still pending (the run ended without
    resolving it: a crash, a killed worker). Returns the reviews this call resolved."""
    closed = []
    for review in SpecReview.objects.filter(
        spec__task_id=task_id, decision=ReviewDecision.PENDING
    ).select_related("spec"):
        now = timezone.now()
        updated = SpecReview.objects.filter(pk=review.pk, decision=ReviewDecision.PENDING).update(
            decision=ReviewDecision.CANCELLED, resolved_at=now
        )
        if updated:
            review.decision, review.resolved_at = ReviewDecision.CANCELLED, now
            closed.append(review)
    return closed


@dataclass(frozen=True)
class ReplyOutcome:
    review: SpecReview
    spec: Spec
    # The spec was parked, or its run died waiting: the task must run again (the caller submits it)
    continue_task: bool


def spec_review_reply(*, user, review_id, decision, feedback="") -> ReplyOutcome:
    """A person's decision on a review: confirm or reject (with feedback). A pending review is
    resolved (the waiting run, in whatever process, sees it); a parked spec — or a pending one
    whose run's process died (its heartbeat is stale) — is confirmed or rejected and its task
    queued again for a continuation run. Anything else is refused and nothing changes."""
    spec_id = parse_spec_review_id(review_id)
    if spec_id is None:
        raise ApplicationError(
            f"{review_id!r} is not a spec review id; it looks like '<spec_id>:spec_review'",
            {"error_code": "invalid_field"},
        )
    if decision not in DECISIONS:
        raise ApplicationError(
            f"decision must be 'confirm' or 'reject', not {decision!r}",
            {"error_code": "invalid_field"},
        )
    if not isinstance(feedback, str) or len(feedback) > MAX_FEEDBACK_CHARS:
        raise ApplicationError(
            f"feedback must be a text of at most {MAX_FEEDBACK_CHARS} characters",
            {"error_code": "invalid_field"},
        )
    feedback = feedback.strip()
    if decision == "reject" and not feedback:
        raise ApplicationError(
            "say what to change: a rejection needs feedback, which the planner revises from",
            {"error_code": "feedback_required"},
        )
    with transaction.atomic():
        review = (
            SpecReview.objects.select_for_update()
            .select_related("spec__task")
            .filter(review_id=review_id, spec_id=spec_id, spec__task__user=user)
            .first()
        )
        if review is None:  # unknown, or another user's task: the same answer
            raise ApplicationError(
                f"spec review {review_id} not found", {"error_code": "not_found"}
            )
        spec = review.spec
        parked = spec.status == SpecStatus.PARKED and spec.task.status == TaskStatus.PARKED
        orphaned = (  # its run's process died while waiting (no heartbeat: checkpoints.py)
            review.decision == ReviewDecision.PENDING
            and spec.status == SpecStatus.PENDING_REVIEW
            and spec.task.status == TaskStatus.AWAITING_REVIEW
            and spec_stale(spec)
        )
        if review.decision != ReviewDecision.PENDING and not parked:
            raise ApplicationError(
                f"spec review {review_id} is already resolved ({review.decision}); "
                "nothing was changed",
                {"error_code": "review_resolved"},
            )
        now = timezone.now()
        if review.decision == ReviewDecision.PENDING:
            review.decision = DECISIONS[decision]
            review.resolved_at = now
        review.user, review.feedback = user, feedback
        review.save(update_fields=["decision", "resolved_at", "user", "feedback"])
        spec.status = SpecStatus.CONFIRMED if decision == "confirm" else SpecStatus.REJECTED
        spec.feedback = feedback if decision == "reject" else ""
        spec.save(update_fields=["status", "feedback", "updated_at"])
        if parked or orphaned:  # a continuation run starts from the stored spec
            Task.objects.filter(
                pk=spec.task_id, status__in=(TaskStatus.PARKED, TaskStatus.AWAITING_REVIEW)
            ).update(status=TaskStatus.QUEUED, cancel_requested_at=None, finished_at=None)
    return ReplyOutcome(review=review, spec=spec, continue_task=parked or orphaned)
