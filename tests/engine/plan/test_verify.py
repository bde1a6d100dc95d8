"""The Verifier on real workspaces, in the real sandbox: the demo's failing test, the fix, spec
commands for other workspaces, an empty workspace, and the details the model depends on."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from apps.engine import sandbox as sandbox_module
from apps.engine.config import VerificationConfig
from apps.engine.plan.verify.run import (
    Verifier,
    answer_verifier,
    condense_pytest,
    is_python_workspace,
)
from apps.engine.ports import VerificationOutcome
from apps.engine.sandbox import BackendProbe, Sandbox, SandboxUnavailable, available_backends

DEMO = Path(__file__).resolve().parents[3] / "demo" / "workspace"
BROKEN_REGEX = 'r"[^a-zA-Z0-9]"'
FIXED_REGEX = 'r"[^a-zA-Z0-9]+"'


@pytest.fixture
def demo(tmp_path) -> Path:
    """A copy of the demo workspace (the original is never touched)."""
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns("__pycache__", ".*_cache"))
    return copy


@pytest.fixture
def verifier() -> Verifier:
    return Verifier(Sandbox(), VerificationConfig(timeout_seconds=120))


def fix_slug(workspace: Path) -> None:
    slug = workspace / "textkit" / "slug.py"
    source = slug.read_text()
    assert BROKEN_REGEX in source
    slug.write_text(source.replace(BROKEN_REGEX, FIXED_REGEX))


def sort_demo_imports(workspace: Path) -> None:
    """The shipped demo's textkit/__init__.py trips ruff's default I001 (unsorted imports) with
    the installed ruff; an agent would fix it after verification reports it. No-op once the
    demo itself is fixed."""
    init = workspace / "textkit" / "__init__.py"
    init.write_text(
        init.read_text().replace("import word_count, top_words", "import top_words, word_count")
    )


@pytest.mark.parametrize("backend", available_backends())
async def test_demo_fails_naming_the_test_then_passes_after_the_fix(demo, backend):
    verifier = Verifier(Sandbox(backend=backend), VerificationConfig(timeout_seconds=120))

    failed = await verifier.verify(demo, [])
    assert not failed.passed
    assert failed.kind == "python"
    assert [c.command for c in failed.commands] == ["pytest -x -q", "ruff check"]
    pytest_error = failed.errors[0]
    assert "test_runs_of_separators_collapse" in pytest_error
    assert "AssertionError" in pytest_error and "hello-world" in pytest_error  # the assertion
    assert "tests/test_slug.py:13" in pytest_error  # where
    assert len(pytest_error) < 3000  # condensed, not the whole log
    assert "test_runs_of_separators_collapse" in failed.error_summary()
    assert failed.backend == backend

    fix_slug(demo)
    after_fix = await verifier.verify(demo, [])
    assert after_fix.commands[0].command == "pytest -x -q" and after_fix.commands[0].passed

    sort_demo_imports(demo)
    passed = await verifier.verify(demo, [])
    assert passed.passed, passed.log
    assert passed.errors == ()
    assert all(c.passed for c in passed.commands)
    assert "5 passed" in passed.log


async def test_checks_leave_no_caches_in_the_workspace(demo, verifier):
    await verifier.verify(demo, [])
    droppings = [
        p.relative_to(demo)
        for p in demo.rglob("*")
        if p.name in {"__pycache__", ".pytest_cache", ".ruff_cache"}
    ]
    assert droppings == []


async def test_non_python_workspace_runs_the_spec_commands(tmp_path, verifier):
    (tmp_path / "README.md").write_text("hello world\n")
    ok = await verifier.verify(tmp_path, ["grep -q hello README.md", "test -s README.md"])
    assert ok.passed and ok.kind == "spec"
    assert [c.command for c in ok.commands] == ["grep -q hello README.md", "test -s README.md"]

    bad = await verifier.verify(
        tmp_path, ["grep -q hello README.md", "echo 'missing section: Usage' >&2; exit 3"]
    )
    assert not bad.passed
    assert len(bad.errors) == 1
    assert "exit 3" in bad.errors[0] and "missing section: Usage" in bad.errors[0]


async def test_python_workspace_also_runs_spec_commands_after_pytest_and_ruff(tmp_path, verifier):
    (tmp_path / "tool.py").write_text("VALUE = 1\n")
    result = await verifier.verify(tmp_path, ["ruff check", "test -f tool.py"])
    assert [c.command for c in result.commands] == ["pytest -x -q", "ruff check", "test -f tool.py"]
    assert result.passed
    assert result.commands[0].note == "no tests collected"  # pytest exit 5 is not a failure


async def test_empty_workspace_passes_and_says_nothing_ran(tmp_path, verifier):
    result = await verifier.verify(tmp_path, [])
    assert result.passed
    assert result.commands == ()
    assert result.kind == "none"
    assert "nothing to verify" in result.summary and "no command ran" in result.summary
    assert "empty" in result.summary


async def test_workspace_without_python_or_spec_commands_passes_and_says_why(tmp_path, verifier):
    (tmp_path / "notes.txt").write_text("just notes\n")
    result = await verifier.verify(tmp_path, ["  "])
    assert result.passed and result.commands == ()
    assert "no verification commands" in result.summary


async def test_ruff_findings_are_reported_with_code_and_location(tmp_path, verifier):
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["F"]\n')
    (tmp_path / "mod.py").write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    result = await verifier.verify(tmp_path, [])
    assert not result.passed
    ruff_error = next(e for e in result.errors if e.startswith("`ruff check`"))
    assert "mod.py:1:8: F401" in ruff_error
    assert "mod.py:5:12: F821" in ruff_error


async def test_without_a_ruff_config_only_errors_fail_not_style(tmp_path, verifier):
    """No [tool.ruff], no ruff.toml: verification.default_ruff_select (E9, F63, F7, F82) with
    --isolated, so neither ruff's own defaults nor a configuration above the workspace apply."""
    (tmp_path / "ruff.toml").write_text('[lint]\nselect = ["ALL"]\n')
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "mod.py").write_text("import os\n\n\ndef f(x=[]):\n    return undefined_name\n")
    result = await verifier.verify(workspace, [])
    ruff = next(c for c in result.commands if c.command == "ruff check")
    assert not ruff.passed
    assert "mod.py:5:12: F821" in ruff.errors[0]
    assert "F401" not in ruff.output and "B006" not in ruff.output and "D10" not in ruff.output

    (workspace / "mod.py").write_text("import os\n\n\ndef f(x=[]):\n    return x\n")
    result = await verifier.verify(workspace, [])
    assert next(c for c in result.commands if c.command == "ruff check").passed


async def test_verification_has_no_network(tmp_path, verifier):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        (tmp_path / "test_net.py").write_text(
            "import socket\n\n\n"
            "def test_reaches_the_outside():\n"
            f"    socket.create_connection(('127.0.0.1', {port}), 3).close()\n"
        )
        result = await verifier.verify(tmp_path, [])
    assert not result.commands[0].passed
    assert "test_reaches_the_outside" in result.errors[0]


async def test_a_hanging_test_times_out_and_later_commands_do_not_run(tmp_path):
    (tmp_path / "test_hang.py").write_text(
        "import time\n\n\ndef test_hangs():\n    time.sleep(60)\n"
    )
    verifier = Verifier(Sandbox(), VerificationConfig(timeout_seconds=2))
    result = await verifier.verify(tmp_path, [])
    assert not result.passed
    assert result.commands[0].timed_out
    assert "timed out" in result.errors[0]
    assert result.duration < 15
    assert "did not run" in result.errors[-1]


async def test_a_deep_traceback_keeps_the_test_and_the_tail(tmp_path, verifier):
    frames = "".join(f"def f{i}():\n    return f{i + 1}()\n\n\n" for i in range(30))
    (tmp_path / "test_deep.py").write_text(
        frames + "def f30():\n    raise KeyError('the real cause')\n\n\n"
        "def test_deep():\n    f0()\n"
    )
    result = await verifier.verify(tmp_path, ["true"])
    error = result.errors[0]
    assert "first failure: test_deep" in error
    assert "KeyError: 'the real cause'" in error
    assert "frames omitted" in error
    assert len(error.splitlines()) < 60


async def test_workspace_venv_pytest_takes_precedence(tmp_path, verifier):
    """A workspace with its own .venv (its dependencies, its plugins) is tested with it."""
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "pytest").mkdir()
    (site / "pytest" / "__init__.py").write_text("")
    (site / "pytest" / "__main__.py").write_text("print('pytest from the workspace venv')\n")
    (tmp_path / "app.py").write_text("X = 1\n")
    result = await verifier.verify(tmp_path, [])
    assert "pytest from the workspace venv" in result.commands[0].output


async def test_result_feeds_the_engine_port_and_the_event(demo, verifier):
    port = answer_verifier(verifier, demo)
    outcome = await port("I fixed it.")
    assert isinstance(outcome, VerificationOutcome)
    assert not outcome.passed
    assert any("test_runs_of_separators_collapse" in e for e in outcome.errors)
    assert "$ pytest -x -q" in outcome.log

    result = await verifier(demo, [])  # the Verifier itself is callable
    data = json.loads(json.dumps(result.as_event_data()))
    assert data["passed"] is False
    assert [c["command"] for c in data["commands"]] == ["pytest -x -q", "ruff check"]
    message = result.error_summary()
    assert message.startswith("Verification failed")
    assert "run_tests" in message


async def test_no_sandbox_backend_refuses_to_verify(monkeypatch, demo):
    none_work = tuple(BackendProbe(name, False, "missing") for name in sandbox_module.BACKENDS)
    monkeypatch.setattr("apps.engine.sandbox.properties.probe_backends", lambda: none_work)
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        await Verifier(Sandbox()).verify(demo, [])


def test_coding_task_detection(tmp_path):
    assert not is_python_workspace(tmp_path)
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "x.py").write_text("")
    assert not is_python_workspace(tmp_path)  # vendored trees do not count
    (tmp_path / "setup.cfg").write_text("[metadata]\n")
    assert is_python_workspace(tmp_path)
    (tmp_path / "setup.cfg").unlink()
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "core.py").write_text("")
    assert is_python_workspace(tmp_path)


def test_condensed_collection_error_keeps_the_import_error():
    output = (
        "\n==================================== ERRORS ====================================\n"
        "_______________________ ERROR collecting tests/test_a.py _______________________\n"
        "ImportError while importing test module '/w/tests/test_a.py'.\n"
        "tests/test_a.py:1: in <module>\n"
        "    import nonexistent_mod\n"
        "E   ModuleNotFoundError: No module named 'nonexistent_mod'\n"
        "=========================== short test summary info ============================\n"
        "ERROR tests/test_a.py\n"
        "1 error in 0.04s\n"
    )
    [error] = condense_pytest(output)
    assert "ERROR collecting tests/test_a.py" in error
    assert "ModuleNotFoundError: No module named 'nonexistent_mod'" in error
    assert "1 error in 0.04s" in error


async def test_tests_failing_before_the_task_are_named_as_preexisting(tmp_path, verifier):
    (tmp_path / "test_a_old.py").write_text("def test_old_breakage():\n    assert 1 == 2\n")
    (tmp_path / "test_b_new.py").write_text("def test_new():\n    assert True\n")
    baseline = await verifier.take_baseline(tmp_path)
    assert baseline.failing_tests == {
        "pytest -x -q": frozenset({"test_a_old.py::test_old_breakage"})
    }
    (tmp_path / "test_b_new.py").write_text("def test_new():\n    assert False\n")  # the task's
    result = await verifier.verify(tmp_path)
    assert not result.passed  # a pre-existing failure still counts
    error = next(e for e in result.errors if e.startswith("`pytest"))
    named = error.split("Pre-existing")[1]
    assert "test_a_old.py::test_old_breakage" in named and "test_new" not in named


async def test_a_task_without_a_baseline_is_judged_on_everything(tmp_path, verifier):
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["B"]\n')
    (tmp_path / "mod.py").write_text("def f(x=[]):\n    return x\n")
    assert not (await verifier.verify(tmp_path)).passed  # no baseline: B006 fails it
    await verifier.take_baseline(tmp_path)
    assert (await verifier.verify(tmp_path)).passed
    (tmp_path / "mod.py").write_text("def f(x=[]):\n    return x\n\n\ndef g(y={}):\n    return y\n")
    result = await verifier.verify(tmp_path)
    assert not result.passed and "mod.py:5:9: B006" in result.errors[0]
