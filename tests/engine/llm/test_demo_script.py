"""The shipped demo script drives a whole session on the demo workspace with the real tools:
read slugify, fix the regex, explain; the workspace's tests pass afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from apps.engine.config import AgentkitConfig
from apps.engine.llm import DEMO_SCRIPT, ChatRequest, Gateway, Message, load_script
from apps.engine.tools import ToolSet
from apps.tools.builtin import registry as builtin
from apps.tools.builtin.context import ToolContext
from tests.support import ROOT


@pytest.fixture
def workspace(tmp_path):
    target = tmp_path / "workspace"
    shutil.copytree(ROOT / "demo" / "workspace", target)
    return target


def tools_for(workspace) -> ToolSet:
    names = ["read_file", "str_replace_editor"]
    return ToolSet(builtin.build_tools(ToolContext(root=workspace), names))


async def play(gateway: Gateway, tools: ToolSet | None, text: str, max_steps: int = 6):
    """A minimal agent loop: call the model, run its tool calls, feed results back."""
    messages = [Message("user", text)]
    calls = []
    for _ in range(max_steps):
        request = ChatRequest(messages=tuple(messages), tools=tools.specs() if tools else ())
        response = await gateway.complete(request)
        messages.append(Message("assistant", response.content, tuple(response.tool_calls)))
        if not response.tool_calls:
            return calls, response
        for call in response.tool_calls:
            calls.append((call.name, call.arguments))
            result = await tools.safe_execute(call.name, call.arguments)
            messages.append(
                Message(
                    "tool",
                    result.for_model(),
                    tool_call_id=call.id,
                    name=call.name,
                    is_error=not result.ok,
                )
            )
    raise AssertionError(f"no final answer within {max_steps} steps")


def run_workspace_tests(workspace) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_slug.py"],
        cwd=workspace,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},  # the workspace needs none
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_demo_script_is_valid_and_ends_with_a_catch_all():
    script = load_script(DEMO_SCRIPT)
    assert script.turns[-1].repeat and script.turns[-1].match is None
    assert all(turn.repeat for turn in script.turns)


async def test_demo_session_reads_fixes_and_explains_and_the_tests_then_pass(workspace):
    assert run_workspace_tests(workspace).returncode != 0
    gateway = Gateway(AgentkitConfig())  # no script configured: the shipped demo
    calls, final = await play(
        gateway, tools_for(workspace), "Fix the failing test in tests/test_slug.py"
    )
    assert calls == [
        ("read_file", {"path": "textkit/slug.py", "symbol": "slugify"}),
        (
            "str_replace_editor",
            {
                "command": "str_replace",
                "path": "textkit/slug.py",
                "old_str": '    words = re.sub(r"[^a-zA-Z0-9]", separator, normalized.lower())',
                "new_str": '    words = re.sub(r"[^a-zA-Z0-9]+", separator, normalized.lower())',
            },
        ),
    ]
    assert "[^a-zA-Z0-9]+" in final.content and final.usage.output_tokens > 0
    result = run_workspace_tests(workspace)
    assert result.returncode == 0, result.stdout


async def test_demo_session_on_a_fixed_workspace_changes_nothing(workspace):
    gateway = Gateway(AgentkitConfig())
    tools = tools_for(workspace)
    await play(gateway, tools, "fix the slug bug")
    before = (workspace / "textkit" / "slug.py").read_text()
    calls, final = await play(gateway, tools, "fix the slug bug")
    assert [name for name, _ in calls] == ["read_file"]
    assert "nothing to change" in final.content
    assert (workspace / "textkit" / "slug.py").read_text() == before


async def test_plain_chat_gets_the_offline_explanation():
    gateway = Gateway(AgentkitConfig())
    calls, final = await play(gateway, None, "hello")
    assert calls == []
    assert "offline scripted model" in final.content
    assert "check_llm" in final.content and "llm.main" in final.content


async def test_a_fix_request_without_tools_gets_the_explanation_not_a_tool_call():
    gateway = Gateway(AgentkitConfig())
    calls, final = await play(gateway, None, "fix the failing test")
    assert calls == [] and "offline scripted model" in final.content
