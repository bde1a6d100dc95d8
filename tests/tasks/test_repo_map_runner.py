"""The runner builds the workspace's repository map at task start and the model gets it as the
system block after the stable one; `repo_map.enabled: false` and @chat send none."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from apps.tasks.run.runner import run_task
from tests.fakes.llm_server import FakeLLMServer
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)


def _use_fake(config_file, server, extra: str = "") -> None:
    config_file(
        f"""
        models: {{main: {{provider: anthropic, model: fake, base_url: "{server.anthropic_base_url}"}}}}
        sandbox: {{mode: "off"}}
        {extra}
        """
    )


async def _system_of_first_call(demo, config_file, *, mode="react", extra="") -> list:
    user, workspace, _ = demo
    with FakeLLMServer(["The slug module holds slugify."]) as server:
        _use_fake(config_file, server, extra)
        task = await sync_to_async(make_task)(user, workspace, goal="what is where?", mode=mode)
        assert await run_task(task.pk) == "completed"
        system = server.requests[0].body["system"]
    return system if isinstance(system, list) else [{"text": system}]


async def test_task_gets_its_workspace_map_as_the_cached_block_after_the_stable_one(
    demo, config_file
):
    _, _, root = demo
    (root / "textkit" / "notes.bin").write_bytes(b"\x00\x01binary")

    system = await _system_of_first_call(demo, config_file)

    assert len(system) == 3 and system[0]["text"].startswith("You are agentkit")
    repo_map = system[1]["text"]
    assert system[1]["cache_control"] == {"type": "ephemeral"}
    assert repo_map.startswith("## Repository map\n")
    assert "textkit/\n" in repo_map and "  slug.py: slugify\n" in repo_map
    assert "  stats.py: word_count, top_words" in repo_map
    assert "notes.bin" not in repo_map
    assert "- workspace: demo" in system[2]["text"]


async def test_repo_map_disabled_in_config_sends_no_map(demo, config_file):
    system = await _system_of_first_call(demo, config_file, extra="repo_map: {enabled: false}")

    assert len(system) == 2
    assert all("Repository map" not in block["text"] for block in system)


async def test_chat_mode_gets_no_map(demo, config_file):
    system = await _system_of_first_call(demo, config_file, mode="direct_chat")

    assert all("Repository map" not in block["text"] for block in system)
