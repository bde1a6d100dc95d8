"""The verification baseline off the critical path (verify/run.py TaskVerifier): it runs on a
copy of the workspace as it was at the start, beside the task's first steps, within its own
short budget; a test that hangs before the change is recorded as pre-existing "timed out"."""

from __future__ import annotations

import time
from pathlib import Path

from apps.engine.config import VerificationConfig
from apps.engine.plan.verify.run import Verifier, answer_verifier
from apps.engine.sandbox import Sandbox

HANGS = "def test_loop():\n    while True:\n        pass\n"


async def test_a_hanging_test_does_not_delay_step_one_and_is_named_pre_existing(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "test_hang.py").write_text(HANGS)
    config = VerificationConfig(
        timeout_seconds=3, baseline_timeout_seconds=2, python_commands=["pytest -x -q"]
    )
    verifier = answer_verifier(Verifier(Sandbox(), config), tmp_path)
    started = time.monotonic()
    await verifier.take_baseline()
    assert time.monotonic() - started < 1.5  # the copy only: the checks run beside step 1
    (tmp_path / "test_hang.py").write_text(HANGS + "\n# the task touched this file\n")
    outcome = await verifier("done")
    assert not outcome.passed
    text = "\n".join(outcome.errors)
    assert "timed out after" in text
    assert "Pre-existing: `pytest -x -q` already timed out after 2 s" in text
    baseline = verifier.verifier.baselines[tmp_path.resolve()]
    assert 1.5 <= baseline.timed_out["pytest -x -q"] < 10  # seconds, not minutes


async def test_the_baseline_judges_the_start_not_the_task_s_changes(tmp_path):
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert 1 == 2\n")  # fails at start
    verifier = answer_verifier(Verifier(Sandbox(), VerificationConfig()), tmp_path)
    await verifier.take_baseline()
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert 1 == 1\n")  # the task fixes it
    outcome = await verifier("fixed")
    assert outcome.passed
    baseline = verifier.verifier.baselines[tmp_path.resolve()]
    assert baseline.failing_tests == {"pytest -x -q": frozenset({"test_a.py::test_a"})}


class RecordingSandbox(Sandbox):
    """The real sandbox, noting each command and where it ran."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[tuple[list[str], Path]] = []

    async def run(self, cmd, cwd, **kwargs):
        self.runs.append((list(cmd) if not isinstance(cmd, str) else [cmd], Path(cwd).resolve()))
        return await super().run(cmd, cwd, **kwargs)


B006 = "def f(x=[]):\n    return x\n"


async def test_lint_s_baseline_covers_only_the_files_the_task_changed(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["B"]\n')
    for n in range(40):  # old findings in files the task never touches
        (workspace / f"untouched_{n:02d}.py").write_text(B006)
    (workspace / "edited.py").write_text(B006)  # an old finding in the file the task edits
    sandbox = RecordingSandbox()
    config = VerificationConfig(python_commands=["ruff check"])
    verifier = answer_verifier(Verifier(sandbox, config), workspace)
    await verifier.take_baseline()
    (workspace / "edited.py").write_text("# the task's comment\n" + B006)

    outcome = await verifier("done")
    assert outcome.passed, outcome.errors  # the old findings, the edited file's one too, ignored
    baseline = verifier.verifier.baselines[workspace.resolve()]
    at_start = [argv for argv, cwd in sandbox.runs if cwd != workspace.resolve()]
    assert len(at_start) == 1 and at_start[0][-1] == "edited.py"  # the changed file only, on
    assert sandbox.runs[-1][1] == baseline.start  # the start's copy
    assert not any(argv[-1].startswith("untouched") for argv in at_start[0])

    (workspace / "edited.py").write_text(B006 + "\n\ndef g(y={}):\n    return y\n")
    (workspace / "added.py").write_text(B006)  # a new file: its finding is new
    outcome = await verifier("done")
    assert not outcome.passed
    text = "\n".join(outcome.errors)
    assert "edited.py:5:9: B006" in text and "added.py:1:9: B006" in text
    assert "edited.py:1:" not in text and "untouched" not in text
    verifier.close()
    assert not baseline.start.exists()  # the start's copy goes at the run's end


async def test_the_start_s_copy_stays_until_the_last_phase_that_took_it_closes(tmp_path):
    """team_collab: the orchestrator and each verifying phase take the baseline; a phase that
    ends must not take the start away from a phase still verifying."""
    (tmp_path / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["B"]\n')
    (tmp_path / "edited.py").write_text(B006)
    config = VerificationConfig(python_commands=["ruff check"])
    verifier = answer_verifier(Verifier(Sandbox(), config), tmp_path)
    await verifier.take_baseline()  # one phase
    await verifier.take_baseline()  # another (the copy is made once)
    (tmp_path / "edited.py").write_text("# changed\n" + B006)
    assert (await verifier("done")).passed
    verifier.close()  # the first phase ends
    start = verifier.verifier.baselines[tmp_path.resolve()].start
    assert start.is_dir()
    assert (await verifier("done")).passed  # the old finding is still judged old
    verifier.close()
    assert not start.exists()
