"""A task's trace (issue 41), with the OpenTelemetry SDK's in-memory exporter: the queueing side
opens the task's trace, its context travels with the RQ job (a real Redis, RQ's own worker), and
the run is a span in that trace with a span per step, per model call (GenAI semantic
conventions) and per tool call — and, unless `tracing.include_text` asks, not one attribute
carries the task's goal, the model's answer or a tool's output."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rq import SimpleWorker

from apps.tasks.models import Task
from apps.tasks.ops import tracing
from apps.tasks.run.executors import task_submit
from tests.tasks.conftest import events_of
from tests.tasks.factories import make_task
from tests.tasks.test_queued_event import rq_queue  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)

GOAL = "fix the failing slug test, secret word zebra-quartz"


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.install(None)
    provider.shutdown()


def test_a_task_is_one_trace_from_its_queueing_to_its_tool_calls_with_no_text(
    demo,
    rq_queue,  # noqa: F811
    spans,
):
    user, workspace, _ = demo
    task = make_task(user, workspace, goal=GOAL, mode="react")
    task_submit(task_id=task.pk)
    SimpleWorker([rq_queue], connection=rq_queue.connection).work(burst=True)
    assert Task.objects.get(pk=task.pk).status in ("completed", "failed")

    finished = spans.get_finished_spans()
    by_name: dict[str, list] = {}
    for span in finished:
        by_name.setdefault(span.name.split(" ")[0], []).append(span)
    submit = by_name["agentkit.task.submit"][0]
    (run,) = by_name["agentkit.task.run"]
    # one trace, the run a child of the queueing side's span (carried through Redis)
    assert {span.context.trace_id for span in finished} == {submit.context.trace_id}
    assert run.parent.span_id == submit.context.span_id
    assert run.attributes["agentkit.task.id"] == task.pk
    assert run.attributes["agentkit.task.status"] == Task.objects.get(pk=task.pk).status

    steps = by_name["agentkit.step"]
    assert steps and all(step.parent.span_id == run.context.span_id for step in steps)
    step_ids = {step.context.span_id for step in steps}
    calls = by_name["chat"]
    assert len(calls) >= 2
    for call in calls:
        assert call.parent.span_id in step_ids | {run.context.span_id}
        attrs = call.attributes
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"]
        assert attrs["gen_ai.usage.input_tokens"] > 0
        assert "gen_ai.usage.output_tokens" in attrs
        assert "gen_ai.usage.cache_read.input_tokens" in attrs
        assert len(attrs["gen_ai.response.finish_reasons"]) == 1
        assert call.start_time <= call.end_time
    tools = by_name["execute_tool"]
    results = [e.data for e in events_of(task) if e.type == "tool_result"]
    assert len(tools) == len(results) > 0
    for span, result in zip(sorted(tools, key=lambda s: s.end_time), results, strict=True):
        assert span.attributes["gen_ai.tool.name"] == result["name"]
        assert span.attributes["agentkit.tool.outcome"] == ("ok" if result["ok"] else "error")
        assert span.parent.span_id in step_ids

    # no text: neither the goal, nor the answer, nor what a tool read
    texts = [GOAL, "zebra-quartz", Task.objects.get(pk=task.pk).result[:40]]
    texts += [str(r["output"])[:40] for r in results if r.get("output")]
    for span in finished:
        for value in span.attributes.values():
            for text in filter(None, texts):
                assert text not in str(value), (span.name, value)
