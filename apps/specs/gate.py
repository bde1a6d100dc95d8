"""The review gate on the database (apps.engine.ports.ReviewGate) for one task. A decision may be
given in any process (another Daphne, the API): the waiting run polls the review's row every
`spec_review.poll_interval_ms`, off the event loop, until the decision or the timeout."""

from __future__ import annotations

import asyncio
import time

from asgiref.sync import sync_to_async

from apps.engine.config.specs import SpecReviewConfig
from apps.engine.plan.spec import SpecDraft
from apps.engine.ports import ReviewDecision, StoredSpec
from apps.specs import selectors, services
from apps.specs.models import Spec


def _stored(spec: Spec) -> StoredSpec:
    return StoredSpec(
        spec_id=spec.pk,
        revision=spec.revision,
        status=spec.status,
        draft=SpecDraft.model_validate(spec.draft),
        feedback=spec.feedback,
    )


def _db(function):
    return sync_to_async(function, thread_sensitive=False)


class DatabaseReviewGate:
    def __init__(self, task_id: int, config: SpecReviewConfig | None = None):
        self.task_id = task_id
        self.config = config or SpecReviewConfig()

    async def latest(self) -> StoredSpec | None:
        spec = await _db(selectors.spec_latest)(task_id=self.task_id)
        return _stored(spec) if spec is not None else None

    async def store(self, draft: SpecDraft) -> StoredSpec:
        return _stored(await _db(services.spec_store)(task_id=self.task_id, draft=draft))

    async def open(self, spec_id: int) -> str:
        review = await _db(services.spec_review_open)(spec_id=spec_id)
        return review.review_id

    async def wait(self, review_id: str, timeout: float) -> ReviewDecision | None:
        deadline = time.monotonic() + timeout
        interval = self.config.poll_interval_ms / 1000
        while True:
            row = await _db(selectors.spec_review_decision)(review_id=review_id)
            if row is None:
                raise LookupError(f"spec review {review_id} disappeared while awaited")
            if row[0] != "pending":
                return ReviewDecision(row[0], row[1])
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            await asyncio.sleep(min(interval, left))

    async def close(self, review_id: str, decision: str) -> ReviewDecision:
        holds = await _db(services.spec_review_close)(review_id=review_id, decision=decision)
        return ReviewDecision(*holds)

    async def set_status(self, spec_id: int, status: str) -> None:
        await _db(services.spec_set_status)(spec_id=spec_id, status=status)
