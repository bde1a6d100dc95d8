"""OpenTelemetry traces of tasks, off unless the standard OTEL_* environment variables ask:
OTEL_TRACES_EXPORTER (`otlp`, `console`; `none` or unset: off unless an OTLP endpoint is set),
OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (OTLP over HTTP/protobuf),
OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_* and OTEL_SDK_DISABLED, as the SDK reads
them.

One trace per task: the process that queues it (a web process) opens `agentkit.task.submit`; its
context travels with the task to the worker (in Redis beside the job ids, job_ids.py), where
every run of the task — a first run, a run deferred and woken, a take-over — is an
`agentkit.task.run` span in that trace, with a span per step (`agentkit.step`), per model call
(`chat <model>`, the GenAI semantic conventions: gen_ai.request.model, gen_ai.usage.input_tokens,
gen_ai.usage.output_tokens, gen_ai.usage.cache_read.input_tokens,
gen_ai.response.finish_reasons) and per tool call (`execute_tool <tool>`: gen_ai.tool.name,
outcome, duration). Spans carry no prompt, answer or tool output unless `tracing.include_text`
asks (agentkit.yaml).

Spans are made from what the run already records (observe.py), with the times things happened:
a step's span is known once its first event arrives, so the model calls that began it are
buffered until then.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import datetime

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)

_provider = None
_lock = threading.Lock()
_configured = False
PROPAGATOR = TraceContextTextMapPropagator()


def _wanted() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    return bool(exporter or endpoint)


def _configure():
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    provider = TracerProvider(
        resource=Resource.create({} if named else {"service.name": "agentkit"})
    )
    names = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    for name in [part.strip() for part in names.split(",") if part.strip()]:
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            log.warning("OTEL_TRACES_EXPORTER %r is not supported here (otlp, console)", name)
    return provider


def provider():
    """The tracer provider of this process, None when tracing is off."""
    global _provider, _configured
    if _configured:
        return _provider
    with _lock:
        if not _configured:
            try:
                _provider = _configure() if _wanted() else None
            except Exception:
                log.exception("tracing could not be set up; it stays off")
                _provider = None
            _configured = True
    return _provider


def install(provider_or_none) -> None:
    """Use this tracer provider (tests: one with an in-memory exporter); None: off."""
    global _provider, _configured
    with _lock:
        _provider, _configured = provider_or_none, True


def tracer():
    current = provider()
    return None if current is None else current.get_tracer("agentkit")


def include_text() -> bool:
    from apps.tasks.conf import agent_config

    try:
        return agent_config().tracing.include_text
    except Exception:
        return False


def submitted(tasks) -> dict[int, dict]:
    """The queueing process: an `agentkit.task.submit` span per new task (`tasks`: (id, mode)
    pairs); returns each one's context to carry to its runs (W3C traceparent), {} when off."""
    current = tracer()
    if current is None:
        return {}
    carriers = {}
    for task_id, mode in tasks:
        span = current.start_span(
            "agentkit.task.submit",
            kind=SpanKind.PRODUCER,
            attributes={"agentkit.task.id": task_id, "agentkit.task.mode": mode},
        )
        carrier: dict[str, str] = {}
        PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
        span.end()
        carriers[task_id] = carrier
    return carriers


def _ns(moment: datetime | float | None) -> int | None:
    if moment is None:
        return None
    if isinstance(moment, datetime):
        return int(moment.timestamp() * 1e9)
    return int(moment * 1e9)


class RunTrace:
    """The spans of one run (observe.py feeds it). Times are wall-clock seconds or datetimes."""

    def __init__(self, tracer_, *, task_id: int, mode: str, carrier: dict | None, text: bool):
        self.tracer = tracer_
        self.text = text
        parent = PROPAGATOR.extract(carrier) if carrier else None
        self.run = tracer_.start_span(
            "agentkit.task.run",
            context=parent,
            kind=SpanKind.CONSUMER if carrier else SpanKind.INTERNAL,
            attributes={"agentkit.task.id": task_id, "agentkit.task.mode": mode},
        )
        self.context = trace.set_span_in_context(self.run)
        self.step_span = None
        self.step_key = None
        self.step_last = None
        self.step_calls_end = 0
        self.pending: list[dict] = []  # model calls not yet given a step

    def _step(self, key, at: datetime) -> None:
        if key == self.step_key:
            self.step_last = at
            return
        self._close_step()
        starts = [call["started"] for call in self.pending]
        begin = min([_ns(at)] + [_ns(start) for start in starts])
        phase, step = key
        attributes = {"agentkit.step": step}
        if phase:
            attributes["agentkit.phase_id"] = phase
        self.step_span = self.tracer.start_span(
            "agentkit.step", context=self.context, attributes=attributes, start_time=begin
        )
        self.step_key, self.step_last, self.step_calls_end = key, at, 0

    def _close_step(self) -> None:
        """End the step's span at its last event (the calls after it begin the next step)."""
        if self.step_span is not None:
            self.step_span.end(end_time=max(_ns(self.step_last), self.step_calls_end))
        self.step_span = None

    def _parent(self):
        return trace.set_span_in_context(self.step_span) if self.step_span else self.context

    def _flush_calls(self) -> None:
        for call in self.pending:
            attributes = call["attributes"]
            span = self.tracer.start_span(
                f"chat {attributes.get('gen_ai.request.model', '')}".strip(),
                context=self._parent(),
                kind=SpanKind.CLIENT,
                attributes=attributes,
                start_time=_ns(call["started"]),
            )
            if call["error"]:
                span.set_status(Status(StatusCode.ERROR, call["error"]))
            span.end(end_time=_ns(call["ended"]))
            if self.step_span is not None:
                self.step_calls_end = max(self.step_calls_end, _ns(call["ended"]))
        self.pending = []

    def model_call(self, *, started: float, ended: float, attributes: dict, error: str | None):
        self.pending.append(
            {"started": started, "ended": ended, "attributes": attributes, "error": error}
        )

    def event(self, kind: str, data: dict, at: datetime) -> None:
        step = data.get("step") if isinstance(data, dict) else None
        if isinstance(step, int) and step > 0:
            self._step((data.get("phase_id"), step), at)
        if self.pending and self.step_span is not None:
            self._flush_calls()
        if kind == "tool_result":
            self._tool(data, at)
        elif kind == "task_finished":
            self.run.set_attribute("agentkit.task.status", str(data.get("status", "")))

    def _tool(self, data: dict, at: datetime) -> None:
        name = str(data.get("name", ""))
        duration = float(data.get("duration_ms") or 0) / 1000
        ok = bool(data.get("ok"))
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": str(data.get("call_id", "")),
            "agentkit.tool.outcome": "ok" if ok else "error",
            "agentkit.tool.duration_ms": duration * 1000,
        }
        if not ok and data.get("error_code"):
            attributes["error.type"] = str(data["error_code"])
        if self.text and data.get("output"):
            attributes["agentkit.tool.output"] = str(data["output"])[:4000]
        end = _ns(at)
        span = self.tracer.start_span(
            f"execute_tool {name}",
            context=self._parent(),
            attributes=attributes,
            start_time=end - int(duration * 1e9),
        )
        if not ok:
            span.set_status(Status(StatusCode.ERROR, str(data.get("error_code") or "error")))
        span.end(end_time=end)

    def end(self, outcome: str, status: str | None) -> None:
        self._flush_calls()  # the last calls: the open step's, else the run's
        self._close_step()
        self.run.set_attribute("agentkit.run.outcome", outcome)
        if status:
            self.run.set_attribute("agentkit.task.status", status)
        if status == "failed":
            self.run.set_status(Status(StatusCode.ERROR, "failed"))
        self.run.end()
