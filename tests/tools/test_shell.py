"""The shell tool through ToolSet.safe_execute (schema check included), on real processes in the
real sandbox."""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest

from apps.engine import sandbox as sandbox_module
from apps.engine.sandbox import BackendProbe, Sandbox
from apps.engine.tools import ToolResult, ToolSet
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import build_tools, tool_class
from apps.tools.builtin.shell import ShellTool, interactive_refusal


def shell_for(workspace: Path, **ctx_options) -> ToolSet:
    ctx = ToolContext(root=workspace, sandbox=ctx_options.pop("sandbox", Sandbox()), **ctx_options)
    return ToolSet(build_tools(ctx, ["shell"]), max_output_chars=10_000)


async def run(tools: ToolSet, **arguments) -> ToolResult:
    return await tools.safe_execute("shell", arguments)


@pytest.fixture
def shell(workspace) -> ToolSet:
    return shell_for(workspace)


def test_registry_builds_the_shell_tool():
    assert tool_class("shell") is ShellTool


async def test_runs_in_the_workspace_and_writes_there(shell, workspace):
    result = await run(shell, command="pwd && echo made > made.txt && ls")
    assert result.ok, result.for_model()
    assert result.output.splitlines() == [str(workspace), "made.txt"]
    assert (workspace / "made.txt").read_text() == "made\n"
    assert result.data["exit_code"] == 0 and result.data["backend"]


async def test_write_outside_the_workspace_fails(shell):
    outside = Path(tempfile.mkdtemp(prefix="agentkit-shell-", dir="/var/tmp"))
    try:
        result = await run(shell, command=f"echo x > {outside}/escape.txt")
        assert not result.ok and result.error_code == "command_failed"
        assert not (outside / "escape.txt").exists()
        # Refused (Landlock) or not even shown (the namespace backends build a new root).
        assert any(
            reason in result.output
            for reason in ("Read-only", "Permission denied", "Directory nonexistent")
        ), result.output
    finally:
        shutil.rmtree(outside)


async def test_network_follows_the_context(workspace):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        probe = f"python -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3)'"
        offline = await run(shell_for(workspace, network=False), command=probe)
        online = await run(shell_for(workspace, network=True), command=probe)
    assert not offline.ok
    assert online.ok, online.for_model()


@pytest.mark.parametrize(
    ("command", "hint"),
    [
        ("vim textkit/slug.py", "str_replace_editor"),
        ("ls && nano notes.txt", "str_replace_editor"),
        ("git log | less", "head -n 50"),
        ("tail -f server.log", "tail -n 50"),
        ("top", "ps aux"),
        ("python", "python -c"),
        ("ipython", "python -c"),
        ("man grep", "--help"),
        ("ssh example.org", "remote"),
        ("watch -n 1 ls", "once"),
        ("git commit", "git commit -m"),
    ],
)
async def test_interactive_commands_are_refused_with_the_alternative(
    shell, workspace, command, hint
):
    result = await run(shell, command=f"touch ran.txt; {command}")
    assert not result.ok
    assert result.error_code == "interactive_command"
    assert hint in result.error
    assert not (workspace / "ran.txt").exists()  # refused before anything ran


@pytest.mark.parametrize(
    "command",
    [
        "tail -n 20 log.txt",
        "python -c 'print(1)'",
        "python -m pytest -q",
        "cat script.py | python",
        "grep -rn vim .",
        "echo less is more",
        "git commit -m 'fix'",
        "less_is_more --help",
    ],
)
def test_non_interactive_commands_pass_the_blocklist(command):
    assert interactive_refusal(command) is None


async def test_the_phase_filter_is_consulted_first(workspace):
    seen = []

    def phase_filter(command: str) -> str | None:
        seen.append(command)
        return "the explore phase allows read-only commands" if "rm " in command else None

    tools = shell_for(workspace, command_filter=phase_filter)
    (workspace / "keep.txt").write_text("keep")
    refused = await run(tools, command="rm keep.txt")
    interactive = await run(tools, command="vim keep.txt")
    allowed = await run(tools, command="cat keep.txt")
    assert refused.error_code == "command_not_allowed"
    assert "read-only commands" in refused.error
    assert (workspace / "keep.txt").exists()
    assert interactive.error_code == "interactive_command"
    assert allowed.ok and allowed.output == "keep"
    assert seen == ["rm keep.txt", "vim keep.txt", "cat keep.txt"]


async def test_timeout_from_arguments_is_capped_by_the_configuration(workspace):
    tools = shell_for(workspace, timeout_seconds=1.0)
    started = time.monotonic()
    result = await run(tools, command="sleep 30", timeout=300)
    assert time.monotonic() - started < 8
    assert result.error_code == "command_timeout"
    assert "1 s" in result.error and "configured maximum" in result.error
    assert result.data["timed_out"] is True

    quick = await run(shell_for(workspace, timeout_seconds=60), command="sleep 30", timeout=0.5)
    assert quick.error_code == "command_timeout" and "0.5 s" in quick.error


async def test_long_output_keeps_head_and_tail(shell):
    result = await run(shell, command="seq 1 100000")
    assert result.ok
    assert len(result.output) < 11_000
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.endswith("99999\n100000")
    assert "characters omitted" in result.output


async def test_failing_command_reports_exit_code_and_both_streams(shell):
    result = await run(shell, command="echo partial; echo 'boom' >&2; exit 4")
    assert not result.ok and result.error_code == "command_failed"
    assert result.error == "exit code 4"
    assert result.output == "partial\n[stderr]\nboom"
    assert "ERROR [command_failed]: exit code 4" in result.for_model()


async def test_schema_requires_a_command(shell):
    result = await shell.safe_execute("shell", {"timeout": 5})
    assert result.error_code == "schema_mismatch"
    bad = await shell.safe_execute("shell", {"command": "true", "timeout": -1})
    assert bad.error_code == "tool_call_invalid"


async def test_no_sandbox_backend_is_an_error_the_model_sees(monkeypatch, workspace):
    none_work = tuple(BackendProbe(name, False, "missing") for name in sandbox_module.BACKENDS)
    monkeypatch.setattr("apps.engine.sandbox.properties.probe_backends", lambda: none_work)
    tools = shell_for(workspace, sandbox=Sandbox(mode="auto"))
    result = await run(tools, command="touch x")
    assert result.error_code == "sandbox_unavailable"
    assert "apt-get install bubblewrap" in result.error
    assert not (workspace / "x").exists()


@pytest.mark.parametrize("memory_cgroup", [True, False])
async def test_a_command_over_the_memory_cap_fails_with_memory_limit(workspace, memory_cgroup):
    """The issue's 4 GiB allocation, through the shell tool: a cgroup where one can be made
    here, the RLIMIT_AS fallback when told so; either way memory_limit with what to do."""
    sandbox = Sandbox(memory_cgroup=memory_cgroup)
    tools = shell_for(workspace, sandbox=sandbox)
    result = await run(tools, command="python3 -c \"b=b'x'*(4<<30)\"")
    assert not result.ok and result.error_code == "memory_limit", result.for_model()
    assert "sandbox.limits.memory_mb" in result.error and "Use less memory" in result.error
    assert result.data["memory_cap"] == sandbox.memory_limit_mode()[0]
    small = await run(tools, command="python3 -c \"b=b'x'*(50<<20); print('fine')\"")
    assert small.ok and small.output == "fine" and small.data["memory_cap"]
