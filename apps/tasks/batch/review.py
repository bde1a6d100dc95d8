"""Spec reviews in a batch run. plan_exec waits for a person to confirm its spec (the review
gate); a batch has nobody at the chat, so with `--review auto` (the default) the batch confirms
each spec as it is requested, in the batch user's name, through the same service a person's
Confirm uses (the review row records who). `--review wait` leaves them to a person in the chat:
the task waits up to spec_review.timeout_seconds, then ends parked."""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import sync_to_async

from apps.specs.models import SpecReview
from apps.specs.services import spec_review_reply
from apps.tasks.services import ApplicationError

REVIEW_POLICIES = ("auto", "wait")
POLL_SECONDS = 0.2

log = logging.getLogger(__name__)


def confirm_pending_reviews(*, user, task_ids: list[int]) -> int:
    """Confirm the pending spec reviews of these tasks; returns how many were confirmed."""
    pending = list(
        SpecReview.objects.filter(spec__task_id__in=task_ids, decision="pending").values_list(
            "review_id", flat=True
        )
    )
    confirmed = 0
    for review_id in pending:
        try:
            spec_review_reply(user=user, review_id=review_id, decision="confirm")
            confirmed += 1
        except ApplicationError as exc:  # resolved meanwhile (cancelled, timed out): fine
            log.info("batch: review %s not confirmed: %s", review_id, exc.message)
    return confirmed


async def auto_confirm(*, user, running: set[int]) -> None:
    """Until cancelled: confirm the reviews the running tasks ask for."""
    while True:
        if running:
            await sync_to_async(confirm_pending_reviews, thread_sensitive=False)(
                user=user, task_ids=list(running)
            )
        await asyncio.sleep(POLL_SECONDS)
