"""The RQ worker of a cluster: `manage.py rqworker agent --worker-class apps.tasks.worker.ReapingWorker`.

RQ's SimpleWorker (a job runs in the worker process itself: one task at a time per worker, its
heartbeat thread and the job's event loop in the same process), plus one daemon thread for the
worker's whole life that

- reaps (reaper.py) every REAP_SECONDS, so a task whose worker died — SIGKILL, out of memory,
  a lost machine — is taken over by another worker within `executor.orphan_after_seconds` plus
  one round (≈ 25 s with the defaults), also while no job runs here: the job-scoped reaper of
  jobs.py runs only while this worker has a task;
- says the worker is alive (`worker_seen`): per queue it listens on, a Redis sorted set of
  worker names by their last round, which `/healthz` reads for the agent queue (apps/tasks/doors/health.py). RQ's own worker heartbeat is refreshed
  only every few minutes while a worker waits for a job.

Exactly once stays the reaper's: every hand-over is a conditional write in the database.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from rq.worker import SimpleWorker

log = logging.getLogger(__name__)

SEEN_PREFIX = "agentkit:workers:seen:"  # + a queue's name: the workers listening on it
SEEN_FORGET_SECONDS = 3600  # names older than this are dropped from the set


def seen_key(queue: str) -> str:
    return SEEN_PREFIX + queue


def worker_seen(connection, name: str, queues, now: float | None = None) -> None:
    """`name` listens on `queues` now: /healthz counts a queue's workers (an evolution worker
    is no agent worker)."""
    moment = time.time() if now is None else now
    pipe = connection.pipeline(transaction=False)
    for queue in queues:
        pipe.zadd(seen_key(queue), {name: moment})
        pipe.zremrangebyscore(seen_key(queue), "-inf", moment - SEEN_FORGET_SECONDS)
    pipe.execute()


def workers_seen_since(connection, queue: str, since: float) -> list[str]:
    return [name.decode() for name in connection.zrangebyscore(seen_key(queue), since, "+inf")]


async def _reap_and_report(connection, name: str, queues: list[str]) -> None:
    from apps.tasks.run.db_threads import install
    from apps.tasks.run.reaper import REAP_SECONDS, reap_round

    install()
    while True:
        try:
            await asyncio.to_thread(worker_seen, connection, name, queues)
        except Exception:  # Redis away: RQ itself will stop this worker soon enough
            log.warning("worker %s could not report itself to Redis", name, exc_info=True)
        try:
            await reap_round()
        except Exception:
            log.warning("reaper round failed", exc_info=True)
        await asyncio.sleep(REAP_SECONDS)


class ReapingWorker(SimpleWorker):
    """SimpleWorker + a reaper thread for the process's life (see the module's docstring)."""

    def work(self, *args, **kwargs):
        threading.Thread(
            target=lambda: asyncio.run(
                _reap_and_report(self.connection, self.name, self.queue_names())
            ),
            name="agentkit-worker-reaper",
            daemon=True,
        ).start()
        return super().work(*args, **kwargs)
