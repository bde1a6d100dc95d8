"""Reads of apps.specs. Keyword-only arguments."""

from __future__ import annotations

from apps.specs.models import Spec, SpecReview, SpecStatus


def spec_latest(*, task_id: int) -> Spec | None:
    return Spec.objects.filter(task_id=task_id).order_by("-revision").first()


def spec_review_decision(*, review_id: str) -> tuple[str, str] | None:
    """(decision, feedback) of the review, or None when it does not exist."""
    row = SpecReview.objects.filter(review_id=review_id).values_list("decision", "feedback")
    return row.first()


def spec_for_user(*, user, spec_id: int) -> Spec | None:
    """The spec when it belongs to one of the user's own tasks, else None."""
    return (
        Spec.objects.select_related("task", "workspace").filter(pk=spec_id, task__user=user).first()
    )


def specs_for_user(*, user, status: str | None = None, limit: int = 50) -> list[Spec]:
    """The user's specs, newest first (one per task: its latest revision is what counts)."""
    queryset = Spec.objects.select_related("task", "workspace").filter(task__user=user)
    if status:
        queryset = queryset.filter(status=status)
    if status == SpecStatus.PARKED:
        queryset = queryset.filter(task__status="parked")
    return list(queryset.order_by("-updated_at", "-id")[:limit])


def spec_payload(spec: Spec) -> dict:
    review = SpecReview.objects.filter(spec=spec).first()
    return {
        "id": spec.pk,
        "task_id": spec.task_id,
        "workspace": {"id": spec.workspace_id, "name": spec.workspace.name},
        "revision": spec.revision,
        "status": spec.status,
        "goal": spec.goal,
        "spec": spec.draft,
        "feedback": spec.feedback,
        "spec_review_id": review.review_id if review else None,
        "review_decision": review.decision if review else None,
        "updated_at": spec.updated_at.isoformat(),
    }


def spec_reviews_unrecorded(*, task_id: int) -> list[SpecReview]:
    """The task's resolved reviews whose request event has no `spec_review_resolved` event (its
    run died while waiting; the answer came later)."""
    from apps.tasks.models import TaskEvent

    events = TaskEvent.objects.filter(
        task_id=task_id, type__in=("spec_review_request", "spec_review_resolved")
    ).values_list("type", "data")
    requested, resolved = set(), set()
    for kind, data in events:
        (requested if kind == "spec_review_request" else resolved).add(
            (data or {}).get("spec_review_id")
        )
    waiting = requested - resolved
    if not waiting:
        return []
    reviews = SpecReview.objects.select_related("spec").filter(
        spec__task_id=task_id, review_id__in=waiting
    )
    return [review for review in reviews.order_by("id") if review.is_resolved]
