"""Atomic phase rollback (seed 001 U4, R19–R21, KTD6–KTD8): a failed phase's validation_command,
then its rollback_command in the sandbox (killed at the timeout), audit events, and the
checkpoint saved only when the rollback worked or none is configured; `@snapshot` restores a
real git workspace without touching the user's branch, HEAD or index."""

from __future__ import annotations

import pytest

from apps.engine.plan.spec import PhaseSpec
from apps.engine.sandbox import SANDBOX_UID, Sandbox, wait_for_no_process
from apps.engine.team.rollback import GitSnapshots, RollbackExecutor
from tests.engine.helpers import of_type, types
from tests.engine.team_support import (
    MemoryCheckpoints,
    WriteFile,
    git,
    git_repo,
    phase,
    run_team,
    spec,
    team,
)

pytestmark = pytest.mark.asyncio


def failing_after_write(path: str = "app.py", text: str = "VALUE = 2  # half done\n") -> list:
    """The phase writes a file, then its model fails (the phase fails mid-way)."""
    return [
        {
            "match": "Your phase",
            "role": "user",
            "tool_calls": [{"name": "write", "arguments": {"path": path, "text": text}}],
        },
        {"after_tool": "write", "fail": "auth"},
    ]


async def test_rollback_fields_are_optional_and_round_trip():
    plain = PhaseSpec(id="build", title="Build")
    assert plain.validation_command is None and plain.rollback_command is None
    full = PhaseSpec(
        id="build",
        title="Build",
        validation_command="pytest -q",
        rollback_command="git checkout app.py",
    )
    assert PhaseSpec.model_validate(full.model_dump()) == full


async def test_executor_runs_a_command_in_the_workspace(tmp_path):
    (tmp_path / "x.txt").write_text("hi")
    outcome = await RollbackExecutor(Sandbox(), tmp_path, 30).run("cat x.txt")
    assert outcome.passed and outcome.exit_code == 0 and outcome.output == "hi"


async def test_executor_reports_a_failing_command(tmp_path):
    outcome = await RollbackExecutor(Sandbox(), tmp_path, 30).run("false")
    assert not outcome.passed and outcome.exit_code == 1


async def test_executor_kills_a_command_at_the_timeout(tmp_path):
    outcome = await RollbackExecutor(Sandbox(), tmp_path, 0.5).run("sleep 31.4159")
    assert not outcome.passed and outcome.timed_out
    assert "killed after 0.5s" in outcome.output
    assert await wait_for_no_process("31.4159", within=5) == []


async def test_executor_runs_commands_as_the_sandbox_user_not_the_server(tmp_path):
    outcome = await RollbackExecutor(Sandbox(), tmp_path, 30).run("id -u")
    assert outcome.output.strip() == str(SANDBOX_UID)


async def test_without_rollback_command_no_rollback_runs_and_checkpoint_is_saved(tmp_path):
    store = MemoryCheckpoints()
    orchestrator, _ = team(
        failing_after_write(), tools=[WriteFile(tmp_path)], root=tmp_path, checkpoints=store
    )
    events = await run_team(orchestrator, spec(phase("build")))
    assert not [t for t in types(events) if t.startswith("phase_rollback")]
    assert [(c.phase_id, c.status) for c in store.saved] == [("build", "failed")]
    assert (tmp_path / "app.py").read_text() == "VALUE = 2  # half done\n"  # nothing undone


async def test_validation_passing_skips_the_rollback_and_saves_the_checkpoint(tmp_path):
    store = MemoryCheckpoints()
    build = phase("build", validation_command="true", rollback_command="touch rolled_back")
    orchestrator, _ = team(
        failing_after_write(), tools=[WriteFile(tmp_path)], root=tmp_path, checkpoints=store
    )
    events = await run_team(orchestrator, spec(build))
    assert not [t for t in types(events) if t.startswith("phase_rollback")]
    assert not (tmp_path / "rolled_back").exists()
    assert [(c.phase_id, c.status) for c in store.saved] == [("build", "failed")]


async def test_validation_failing_runs_the_rollback_then_saves_the_checkpoint(tmp_path):
    store = MemoryCheckpoints()
    build = phase(
        "build",
        validation_command="grep -q 'VALUE = 1' app.py",
        rollback_command="echo 'VALUE = 1' > app.py",
    )
    (tmp_path / "app.py").write_text("VALUE = 1\n")
    orchestrator, _ = team(
        failing_after_write(), tools=[WriteFile(tmp_path)], root=tmp_path, checkpoints=store
    )
    events = await run_team(orchestrator, spec(build))
    kinds = types(events)
    assert kinds.index("phase_failed") < kinds.index("phase_rollback_started")
    assert kinds.index("phase_rollback_started") < kinds.index("phase_rollback_completed")
    started = of_type(events, "phase_rollback_started")[0].data
    assert started["command"] == "echo 'VALUE = 1' > app.py"
    assert started["validation"]["passed"] is False
    assert (tmp_path / "app.py").read_text() == "VALUE = 1\n"
    assert [(c.phase_id, c.status) for c in store.saved] == [("build", "rolled_back")]
    assert events[-1].data["status"] == "failed"  # rolled back, but the phase still failed


async def test_failed_rollback_emits_rollback_failed_and_saves_no_checkpoint(tmp_path):
    store = MemoryCheckpoints()
    build = phase("build", validation_command="false", rollback_command="exit 1")
    orchestrator, _ = team(
        failing_after_write(), tools=[WriteFile(tmp_path)], root=tmp_path, checkpoints=store
    )
    events = await run_team(orchestrator, spec(build))
    failed = of_type(events, "phase_rollback_failed")
    assert len(failed) == 1 and failed[0].data["exit_code"] == 1
    assert failed[0].data["checkpoint_saved"] is False
    assert store.saved == []  # R21: a broken state is never checkpointed


async def test_a_hanging_rollback_is_killed_at_the_timeout_and_saves_no_checkpoint(tmp_path):
    store = MemoryCheckpoints()
    build = phase("build", rollback_command="sleep 27.1828")
    orchestrator, _ = team(
        failing_after_write(),
        tools=[WriteFile(tmp_path)],
        root=tmp_path,
        checkpoints=store,
        timeout=0.5,
    )
    events = await run_team(orchestrator, spec(build))
    failed = of_type(events, "phase_rollback_failed")[0].data
    assert failed["timed_out"] is True
    assert await wait_for_no_process("27.1828", within=5) == []
    assert store.saved == []


async def test_git_checkout_rollback_restores_the_file_in_a_real_repository(tmp_path):
    root = git_repo(tmp_path / "repo")
    store = MemoryCheckpoints()
    build = phase(
        "build",
        validation_command="grep -q 'VALUE = 1' app.py",
        rollback_command="git checkout app.py",
    )
    orchestrator, _ = team(
        failing_after_write(), tools=[WriteFile(root)], root=root, checkpoints=store
    )
    events = await run_team(orchestrator, spec(build))
    assert of_type(events, "phase_rollback_completed")
    assert (root / "app.py").read_text() == "VALUE = 1\n"
    assert git(root, "status", "--porcelain") == ""


async def test_snapshot_restores_the_tree_without_touching_branch_head_or_index(tmp_path):
    root = git_repo(tmp_path / "repo")
    (root / "staged.txt").write_text("the user's staged work\n")
    git(root, "add", "staged.txt")
    (root / "build").mkdir()
    (root / "build" / "cache.bin").write_text("ignored\n")
    head, index_before = (
        git(root, "rev-parse", "HEAD"),
        git(root, "diff", "--cached", "--name-only"),
    )
    turns = [
        {
            "match": "Your phase",
            "role": "user",
            "tool_calls": [
                {"name": "write", "arguments": {"path": "app.py", "text": "broken(\n"}},
                {"name": "write", "arguments": {"path": "added.py", "text": "new\n"}},
            ],
        },
        {"after_tool": "write", "fail": "auth"},
    ]
    store = MemoryCheckpoints()
    build = phase(
        "build",
        validation_command="python3 -c 'import ast; ast.parse(open(\"app.py\").read())'",
        rollback_command="@snapshot",
    )
    orchestrator, _ = team(turns, tools=[WriteFile(root)], root=root, checkpoints=store)
    events = await run_team(orchestrator, spec(build))

    completed = of_type(events, "phase_rollback_completed")[0].data
    assert (root / "app.py").read_text() == "VALUE = 1\n"
    assert not (root / "added.py").exists()
    assert (root / "staged.txt").read_text() == "the user's staged work\n"
    assert (root / "build" / "cache.bin").exists()  # ignored files are left alone
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git(root, "diff", "--cached", "--name-only") == index_before == "staged.txt"
    ref = GitSnapshots(None, 7).ref("build")
    assert git(root, "rev-parse", ref) == completed["snapshot_ref"]
    assert [(c.status, c.snapshot_ref) for c in store.saved] == [
        ("rolled_back", completed["snapshot_ref"])
    ]


async def test_snapshot_without_git_is_flagged_up_front_and_its_rollback_fails_clearly(tmp_path):
    store = MemoryCheckpoints()
    orchestrator, _ = team(
        failing_after_write(), tools=[WriteFile(tmp_path)], root=tmp_path, checkpoints=store
    )
    events = await run_team(orchestrator, spec(phase("build", rollback_command="@snapshot")))
    warning = of_type(events, "error")[0].data
    assert warning["fatal"] is False
    assert warning["error_struct"]["error_code"] == "snapshot_unavailable"
    assert "git init" in warning["error_struct"]["suggestions"][0]
    assert types(events).index("error") < types(events).index("phase_started")
    failed = of_type(events, "phase_rollback_failed")[0].data
    assert "needs a git repository" in failed["output"] and "none was taken" in failed["output"]
    assert store.saved == []  # nothing restored: no checkpoint
