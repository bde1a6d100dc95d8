"""A model call cut before its end still counts (loop/runaway.py, `StepWatch.partial`): through
the runner, a task whose stream the wall limit cut, on a server that sends no usage block,
stores non-zero usage estimated from the prompt sent and the text that arrived."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from apps.tasks.models import Task
from apps.tasks.run.runner import run_task
from tests.fakes.llm_server import FakeLLMServer
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)

# About 300 tokens of text that never repeats itself, streamed at 40 tokens/s: no call ends
# within the one-second limits below.
SLOW = " ".join(f"thought{i} about the slug bug and its fix;" for i in range(120))


@pytest.mark.parametrize(
    ("react", "code"),
    [
        ("{max_wall_seconds: 1.0, step_wall_seconds: null}", "timeout"),  # the run's wall time
        ("{max_wall_seconds: 60, step_wall_seconds: 0.6}", "runaway_output"),  # the step's
    ],
)
async def test_a_cut_stream_leaves_estimated_usage_on_the_task(demo, config_file, react, code):
    user, workspace, _ = demo
    with FakeLLMServer(
        [{"text": SLOW, "repeat": True}], tokens_per_second=40, usage_block=False
    ) as server:
        config_file(
            f"""
            models: {{main: {{provider: openai, model: fake, base_url: "{server.openai_base_url}"}}}}
            llm: {{retries: {{max_attempts: 1}}}}
            sandbox: {{mode: "off"}}
            react: {react}
            fallback_chain: {{recovery: {{enabled: false}}}}
            """
        )
        task = await sync_to_async(make_task)(user, workspace, goal="fix the slug bug")
        assert await run_task(task.pk) == "failed"
    stored = await sync_to_async(Task.objects.get)(pk=task.pk)
    assert stored.error["error_code"] == code
    usage = stored.usage
    assert usage["estimated"] is True
    assert usage["input_tokens"] > 100  # the system prompt and the tools' schemas were sent
    assert 0 < usage["output_tokens"] < 300  # the text that arrived, not the whole answer
    assert usage["llm_calls"] >= 1
