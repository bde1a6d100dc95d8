"""Which tasks have a live run: the run's claim on its task and its process's heartbeat.

A run claims its task before it does anything (`run_claim`): one conditional UPDATE sets
`run_owner` to the run's own token unless another run holds the task and its heartbeat is fresh,
so a task is never run twice at once (a re-sent message, a reaper and a person resuming it, two
workers). While the run lives, ONE thread of its process (`Beater`) touches the `heartbeat_at`
of every task its runs hold, every HEARTBEAT_SECONDS, in one UPDATE: a thread, not the event
loop, so a loop busy for seconds does not make its tasks look dead. A task whose heartbeat is
older than `executor.orphan_after_seconds` (default 20 s: ten missed beats) has no live run; the
reaper (reaper.py) ends or resumes it, and a claim may take it over.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from datetime import datetime, timedelta

from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from apps.tasks.models import FINAL_STATUSES, Task

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 2.0


def orphan_after_seconds() -> float:
    from apps.tasks.conf import agent_config

    try:
        return agent_config().executor.orphan_after_seconds
    except Exception:  # a broken config is reported by the run itself
        return 20.0


def stale_before(now: datetime | None = None) -> datetime:
    """Heartbeats older than this belong to runs that are gone."""
    return (now or timezone.now()) - timedelta(seconds=orphan_after_seconds())


def heartbeat_stale(beat: datetime | None, since: datetime | None = None) -> bool:
    """No live run beats for a task whose last heartbeat is `beat` (None: never claimed; then
    `since`, when it was queued, counts instead)."""
    moment = beat or since
    return moment is None or moment < stale_before()


def _process_tag() -> str:
    return f"{socket.gethostname()[:40]}:{os.getpid()}"


def run_claim(task_id: int) -> str | None:
    """Claim the task for a new run; returns the run's token, or None when the task has ended or
    another run holds it and beats."""
    token = f"{_process_tag()}:{uuid.uuid4().hex[:12]}"
    now = timezone.now()
    free = Q(run_owner="") | Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale_before(now))
    claimed = (
        Task.objects.filter(free, pk=task_id)
        .exclude(status__in=FINAL_STATUSES)
        .update(run_owner=token, heartbeat_at=now)
    )
    if not claimed:
        return None
    beater().add(token)
    return token


def run_release(task_id: int, token: str) -> None:
    """The run ended: its claim goes (the heartbeat stays as it was, the last sign of life)."""
    beater().discard(token)
    Task.objects.filter(pk=task_id, run_owner=token).update(run_owner="")


def run_holds(task_id: int, token: str) -> bool:
    return Task.objects.filter(pk=task_id, run_owner=token).exists()


class Beater:
    """This process's heartbeat thread: touches the tasks its live runs hold."""

    def __init__(self) -> None:
        self.tokens: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, token: str) -> None:
        with self._lock:
            self.tokens.add(token)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="agentkit-heartbeat", daemon=True
                )
                self._thread.start()

    def discard(self, token: str) -> None:
        with self._lock:
            self.tokens.discard(token)

    def beat(self) -> int:
        with self._lock:
            tokens = sorted(self.tokens)
        if not tokens:
            return 0
        close_old_connections()  # a broken or too old connection is replaced
        return Task.objects.filter(run_owner__in=tokens).update(heartbeat_at=timezone.now())

    def _run(self) -> None:
        while True:
            self._wake.wait(HEARTBEAT_SECONDS)
            try:
                self.beat()
            except Exception:  # a missed beat: the next one is 2 s away, the grace ten beats
                log.warning("heartbeat of the running tasks failed", exc_info=True)


_beater: Beater | None = None
_beater_pid: int | None = None
_beater_lock = threading.Lock()


def beater() -> Beater:
    """This process's beater (a forked child gets its own)."""
    global _beater, _beater_pid
    with _beater_lock:
        if _beater is None or _beater_pid != os.getpid():
            _beater, _beater_pid = Beater(), os.getpid()
        return _beater
