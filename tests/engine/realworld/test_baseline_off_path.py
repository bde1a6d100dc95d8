"""The verification baseline off the critical path (verify/run.py TaskVerifier): it runs on a
copy of the workspace as it was at the start, beside the task's first steps, within its own
short budget; a test that hangs before the change is recorded as pre-existing "timed out"."""

from __future__ import annotations

import time

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
