"""JSON API of specs: list and read the user's specs, and decide a review —
`POST /api/specs/<id>/review` {"decision": "confirm"|"reject", "feedback"}. Same authentication
and error shape as apps/tasks/doors/api.py. Confirming (or rejecting) a parked spec queues its task
again: the continuation run starts from the stored spec."""

from __future__ import annotations

from django.http import JsonResponse

from apps.engine.plan.spec import spec_review_id
from apps.specs import selectors, services
from apps.specs.models import SpecStatus
from apps.tasks.doors.api import _json_body, api_view, error
from apps.tasks.run import executors
from apps.tasks.services import ApplicationError


@api_view(("GET",))
def specs(request):
    """The user's specs, newest first; `?status=parked` lists the ones waiting for a Resume."""
    status = request.GET.get("status") or None
    if status is not None and status not in SpecStatus.values:
        return error(
            400,
            "invalid_field",
            f"unknown status {status!r}; one of {', '.join(SpecStatus.values)}",
        )
    found = selectors.specs_for_user(user=request.user, status=status)
    return JsonResponse({"specs": [selectors.spec_payload(spec) for spec in found]})


@api_view(("GET",))
def spec_detail(request, spec_id: int):
    spec = selectors.spec_for_user(user=request.user, spec_id=spec_id)
    if spec is None:
        return error(404, "not_found", "spec not found")
    return JsonResponse(selectors.spec_payload(spec))


@api_view(("POST",))
def spec_review(request, spec_id: int):
    body = _json_body(request)
    decision = body.get("decision")
    if decision in (None, ""):
        return error(400, "missing_fields", "send 'decision': 'confirm' or 'reject'")
    try:
        outcome = services.spec_review_reply(
            user=request.user,
            review_id=spec_review_id(spec_id),
            decision=decision,
            feedback=body.get("feedback", ""),
        )
    except ApplicationError as exc:
        if exc.extra.get("error_code") == "review_resolved":
            return error(409, "review_resolved", exc.message)
        raise
    if outcome.continue_task:
        executors.task_submit(task_id=outcome.spec.task_id)
    spec = selectors.spec_for_user(user=request.user, spec_id=spec_id)
    return JsonResponse(
        {
            "spec": selectors.spec_payload(spec),
            "decision": outcome.review.decision,
            "continued": outcome.continue_task,
        }
    )
