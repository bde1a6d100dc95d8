"""The runner's seams for metrics (metrics.py) and traces (tracing.py): nothing in the engine.

- `RunObserver`: one per run; the run's EventRecorder hands it every event it records (tool
  results, verification, the end), the runner tells it how the run ended;
- `ObservedGateway`: the model gateway the runner builds, timing each call (whole, and to its
  first text for a streamed one) and reading its usage, cost and finish reason.
"""

from __future__ import annotations

import logging
import time
from contextlib import aclosing
from datetime import datetime

from django.utils import timezone

from apps.engine.llm.gateway import Gateway
from apps.tasks.ops import metrics as m
from apps.tasks.ops import tracing

log = logging.getLogger(__name__)

# 128 + the signal: what a command killed by a signal exits with (SIGKILL, SIGTERM, SIGXCPU).
KILLED_EXIT_CODES = frozenset({-9, -15, 137, 143, 152})


def sandbox_kill_cause(data: dict) -> str | None:
    """Why the sandbox killed the command of a failed tool call, if it did."""
    code = data.get("error_code")
    if code == "command_timeout":
        return "timeout"
    if code == "memory_limit":
        return "memory"
    extra = data.get("data") or {}
    if isinstance(extra, dict) and extra.get("exit_code") in KILLED_EXIT_CODES:
        return "signal"
    return None


class RunObserver:
    """What one run did, for the metrics and (when on) its trace."""

    def __init__(self, task, *, carrier: dict | None = None, queue_wait=None):
        self.task_id, self.mode = task.pk, task.mode
        self.created_at = task.created_at
        self.first_run = task.started_at is None
        self.started = time.monotonic()
        self.status: str | None = None
        if queue_wait is not None:
            m.QUEUE_WAIT.labels(queue_wait[0]).observe(max(0.0, queue_wait[1]))
        self.trace = None
        current = tracing.tracer()
        if current is not None:
            try:
                self.trace = tracing.RunTrace(
                    current,
                    task_id=task.pk,
                    mode=task.mode,
                    carrier=carrier,
                    text=tracing.include_text(),
                )
            except Exception:
                log.warning("task %s: its trace could not be started", task.pk, exc_info=True)

    def event(self, kind: str, data: dict, ts: datetime | None = None) -> None:
        """An event the run recorded. Never raises: the run goes on whatever happens here."""
        try:
            self._count(kind, data)
            if self.trace is not None:
                self.trace.event(kind, data, ts or timezone.now())
        except Exception:
            log.warning("task %s: event %s not observed", self.task_id, kind, exc_info=True)

    def _count(self, kind: str, data: dict) -> None:
        if kind == "tool_result":
            tool = str(data.get("name", ""))
            ok = bool(data.get("ok"))
            m.TOOL_CALLS.labels(tool, "ok" if ok else "error").inc()
            m.TOOL_SECONDS.labels(tool).observe(float(data.get("duration_ms") or 0) / 1000)
            if not ok:
                m.TOOL_ERRORS.labels(tool, str(data.get("error_code") or "unknown")).inc()
                cause = sandbox_kill_cause(data)
                if cause is not None:
                    m.SANDBOX_KILLS.labels(cause).inc()
        elif kind == "verification_result":
            m.VERIFICATIONS.labels("passed" if data.get("passed") else "failed").inc()
        elif kind == "task_started" and self.first_run and self.created_at is not None:
            waited = (timezone.now() - self.created_at).total_seconds()
            m.TASK_WAIT.labels(self.mode).observe(max(0.0, waited))
        elif kind == "task_finished":
            self.status = str(data.get("status", ""))
            m.TASKS_FINISHED.labels(self.mode, self.status).inc()

    def model_call(self, alias, started, first_text, ended, response, error) -> None:
        """A model call ended (`response` None: it failed with `error`). Times: time.time()."""
        try:
            self._model_call(alias, started, first_text, ended, response, error)
        except Exception:
            log.warning("task %s: a model call not observed", self.task_id, exc_info=True)

    def _model_call(self, alias, started, first_text, ended, response, error) -> None:
        alias = (response.alias if response is not None and response.alias else alias) or ""
        m.MODEL_CALL.labels(alias, "ok" if error is None else "error").observe(ended - started)
        if first_text is not None:
            m.MODEL_TTFT.labels(alias).observe(first_text - started)
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": alias,
            "agentkit.model.alias": alias,
        }
        if response is not None:
            usage = response.usage
            for kind, count in (
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
                ("cache_read", usage.cache_read_tokens),
                ("cache_write", usage.cache_write_tokens),
            ):
                if count:
                    m.MODEL_TOKENS.labels(alias, kind).inc(count)
            if response.cost:
                m.MODEL_COST.labels(alias).inc(response.cost)
            attributes.update(
                {
                    "gen_ai.request.model": response.model or alias,
                    "gen_ai.response.model": response.model or alias,
                    "gen_ai.usage.input_tokens": usage.input_tokens,
                    "gen_ai.usage.output_tokens": usage.output_tokens,
                    "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
                    "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
                    "gen_ai.response.finish_reasons": [response.finish_reason or "unknown"],
                    "agentkit.model.cost": response.cost,
                    "agentkit.model.attempts": response.attempts,
                }
            )
            if response.request_id:
                attributes["gen_ai.response.id"] = response.request_id
            if self.trace is not None and self.trace.text and response.content:
                attributes["gen_ai.completion"] = response.content[:4000]
        else:
            attributes["error.type"] = type(error).__name__
        if first_text is not None:
            attributes["agentkit.model.time_to_first_token_ms"] = (first_text - started) * 1000
        if self.trace is not None:
            self.trace.model_call(
                started=started,
                ended=ended,
                attributes=attributes,
                error=None if error is None else type(error).__name__,
            )

    def run_ended(self, outcome: str, status: str | None) -> None:
        """`outcome`: finished (its engine ran to an end), deferred (back to the queue), other."""
        try:
            m.RUNS.labels(self.mode, outcome).inc()
            if outcome == "finished":
                m.RUN_SECONDS.labels(self.mode, status or "unknown").observe(
                    time.monotonic() - self.started
                )
            if self.trace is not None:
                self.trace.end(outcome, status)
        except Exception:
            log.warning("task %s: the run's end not observed", self.task_id, exc_info=True)


class ObservedGateway(Gateway):
    """The gateway, with each call reported to the run's observer (timing, usage, cost)."""

    def __init__(self, *args, observer: RunObserver | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.observer = observer

    async def complete(self, request, *, model=None, fallbacks=True):
        started = time.time()
        try:
            response = await super().complete(request, model=model, fallbacks=fallbacks)
        except Exception as exc:
            self._report(model, started, None, None, exc)
            raise
        self._report(model, started, None, response, None)
        return response

    def stream(self, request, *, model=None, fallbacks=True):
        return self._observed(super().stream(request, model=model, fallbacks=fallbacks), model)

    async def _observed(self, deltas, model):
        started = time.time()
        first_text = None
        response = None
        error = None
        try:
            async with aclosing(deltas) as stream:
                async for delta in stream:
                    if first_text is None and delta.text:
                        first_text = time.time()
                    if delta.response is not None:
                        response = delta.response
                    yield delta
        except Exception as exc:
            error = exc
            raise
        finally:
            if response is not None or error is not None:
                self._report(model, started, first_text, response, error)

    def _report(self, model, started, first_text, response, error) -> None:
        if self.observer is not None:
            alias = model or self.main_alias
            self.observer.model_call(alias, started, first_text, time.time(), response, error)
