"""A small model's context window sizes the repository map (at most 1/16 of the window)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from apps.tasks.run.runner import run_task
from tests.fakes.llm_server import FakeLLMServer
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)


async def map_sent(demo, config_file, window: str) -> str:
    user, workspace, root = demo
    for i in range(40):  # a workspace whose whole map is larger than a small window allows
        (root / "textkit" / f"module_{i:02d}.py").write_text(f"def function_{i}():\n    pass\n")
    with FakeLLMServer(["Here."]) as server:
        base = server.openai_base_url
        config_file(
            f'models: {{main: {{provider: openai, model: fake, base_url: "{base}"{window}}}}}\n'
            'sandbox: {mode: "off"}\n'
        )
        task = await sync_to_async(make_task)(user, workspace, goal="what is where?")
        assert await run_task(task.pk) == "completed"
        (first, *_) = [r for r in server.requests if r.protocol == "openai"]
        system = first.body["messages"][0]["content"]
    start = system.index("## Repository map")
    return system[start:]


async def test_a_small_window_gets_a_small_map(demo, config_file):
    small = await map_sent(demo, config_file, ", context_window: 2048")
    assert len(small.split("\n\n")[0]) <= 128 * 4 + 200  # 2048 // 16 tokens, a line's slack


async def test_the_default_window_gets_the_configured_map(demo, config_file):
    large = await map_sent(demo, config_file, "")
    assert "module_39.py" in large.split("\n\n")[0]
