"""run_tests: the agent runs what verification will run, or one command, and gets the condensed
result; real sandbox, real pytest and ruff."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from apps.engine.config import VerificationConfig
from apps.engine.plan.verify.run import Verifier
from apps.engine.sandbox import Sandbox
from apps.engine.tools import ToolResult, ToolSet
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import build_tools, tool_class
from apps.tools.builtin.run_tests import RunTestsTool

DEMO = Path(__file__).resolve().parents[2] / "demo" / "workspace"


@pytest.fixture
def demo(tmp_path) -> Path:
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns("__pycache__", ".*_cache"))
    return copy


def tools_for(root: Path, **ctx_options) -> ToolSet:
    ctx = ToolContext(root=root, sandbox=Sandbox(), **ctx_options)
    return ToolSet(build_tools(ctx, ["run_tests"]))


async def run(tools: ToolSet, **arguments) -> ToolResult:
    return await tools.safe_execute("run_tests", arguments)


def test_registry_builds_the_run_tests_tool():
    assert tool_class("run_tests") is RunTestsTool


async def test_failing_demo_reports_the_first_failure(demo):
    result = await run(tools_for(demo))
    assert not result.ok and result.error_code == "tests_failed"
    assert "pytest -x -q: FAILED" in result.error
    assert "test_runs_of_separators_collapse" in result.output
    assert "E       AssertionError" in result.output
    assert [c["command"] for c in result.data["commands"]] == ["pytest -x -q", "ruff check"]
    assert all("output" not in c for c in result.data["commands"])  # full log stays out


async def test_one_command_instead_of_the_full_verification(demo):
    passing = await run(tools_for(demo), command="pytest tests/test_stats.py -q")
    assert passing.ok, passing.for_model()
    assert passing.output == "PASSED: pytest tests/test_stats.py -q: passed"

    failing = await run(tools_for(demo), command="pytest -q tests/test_slug.py")
    assert failing.error_code == "tests_failed"
    assert "test_runs_of_separators_collapse" in failing.output


async def test_spec_commands_from_the_context_for_a_non_python_workspace(tmp_path):
    (tmp_path / "CHANGELOG.md").write_text("## 1.0\n")
    tools = tools_for(tmp_path, verification_commands=("grep -q '## 1.1' CHANGELOG.md",))
    result = await run(tools)
    assert result.error_code == "tests_failed"
    assert "grep -q '## 1.1' CHANGELOG.md" in result.output

    (tmp_path / "CHANGELOG.md").write_text("## 1.1\n## 1.0\n")
    assert (await run(tools)).ok


async def test_empty_workspace_says_nothing_ran(tmp_path):
    result = await run(tools_for(tmp_path))
    assert result.ok
    assert "nothing to verify" in result.output


async def test_the_phase_filter_applies_to_an_explicit_command(demo):
    def no_rm(command: str) -> str | None:
        return "not in this phase" if command.startswith("rm") else None

    result = await run(tools_for(demo, command_filter=no_rm), command="rm -rf tests")
    assert result.error_code == "command_not_allowed"
    assert (demo / "tests").is_dir()


async def test_a_given_verifier_is_used(demo):
    verifier = Verifier(
        Sandbox(), VerificationConfig(python_commands=["pytest -q tests/test_stats.py"])
    )
    tool = RunTestsTool(ToolContext(root=demo), verifier=verifier)
    result = await tool.execute()
    assert result.ok, result.for_model()
    assert [c["command"] for c in result.data["commands"]] == ["pytest -q tests/test_stats.py"]


async def test_a_test_over_the_memory_cap_fails_with_memory_limit_and_advice(tmp_path):
    """Verification's command ran out of memory: memory_limit (cgroup or RLIMIT_AS, whichever
    holds here), the advice in the error, error_code on the command."""
    (tmp_path / "test_big.py").write_text(
        "def test_builds_a_huge_string():\n    assert len(b'x' * (4 << 30)) > 0\n"
    )
    tools = ToolSet(build_tools(ToolContext(root=tmp_path, sandbox=Sandbox()), ["run_tests"]))
    result = await run(tools, command="pytest -q")
    assert not result.ok and result.error_code == "memory_limit", result.for_model()
    assert "ran out of memory" in result.error and "sandbox.limits.memory_mb" in result.error
    assert "sandbox.limits.memory_mb" in result.output
    assert [c["error_code"] for c in result.data["commands"]] == ["memory_limit"]

    (tmp_path / "test_big.py").write_text("def test_small():\n    assert len(b'x' * 1000)\n")
    passing = await run(tools, command="pytest -q")
    assert passing.ok and passing.data["commands"][0]["error_code"] == ""
