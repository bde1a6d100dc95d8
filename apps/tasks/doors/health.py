"""`GET /healthz` for load balancers and monitors: 200 when this web process can reach the
database and Redis and, with `executor: rq`, at least one worker of the agent queue
(`executor.queue`; the evolution worker does not count) reported itself in the last
WORKER_SEEN_SECONDS (apps/tasks/worker.py); else 503. The JSON body says which part failed. No
login (a load balancer has none); it reveals no names, addresses or secrets."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

WORKER_SEEN_SECONDS = 30.0


def _database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True}


def _redis_connection():
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def _redis() -> dict:
    if not settings.REDIS_URL:
        return {"ok": True, "configured": False}
    try:
        _redis_connection().ping()
    except Exception as exc:
        return {"ok": False, "configured": True, "error": type(exc).__name__}
    return {"ok": True, "configured": True}


def _workers(redis_ok: bool) -> dict:
    from apps.tasks.conf import agent_config
    from apps.tasks.worker import workers_seen_since

    executor = agent_config().executor
    required = executor.kind == "rq"
    if not required:
        return {"ok": True, "required": False}
    if not settings.REDIS_URL or not redis_ok:
        return {"ok": False, "required": True, "seen": 0}
    try:
        since = time.time() - WORKER_SEEN_SECONDS
        seen = workers_seen_since(_redis_connection(), executor.queue, since)
    except Exception as exc:
        return {"ok": False, "required": True, "error": type(exc).__name__}
    return {"ok": bool(seen), "required": True, "seen": len(seen)}


def health() -> dict:
    database = _database()
    redis = _redis()
    workers = _workers(redis["ok"])
    ok = database["ok"] and redis["ok"] and workers["ok"]
    return {"ok": ok, "database": database, "redis": redis, "workers": workers}


@require_GET
def healthz(request):
    report = health()
    return JsonResponse(report, status=200 if report["ok"] else 503)
