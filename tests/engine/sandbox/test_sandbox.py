"""The sandbox against real processes: every backend that works on this machine is tested
explicitly (a backend that does not work here is reported as skipped, with the reason)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from apps.engine import sandbox as sandbox_module
from apps.engine.sandbox import (
    PROPERTIES,
    BackendProbe,
    Sandbox,
    SandboxUnavailable,
    probe_backends,
    processes_matching,
    wait_for_no_process,
)

ROOT = Path(__file__).resolve().parents[3]
VARIANTS = [*(probe.name for probe in probe_backends()), "bwrap+landlock"]


def _variant_or_skip(name: str) -> Sandbox:
    probes = {probe.name: probe for probe in probe_backends()}
    base = name.split("+")[0]
    if not probes[base].available:
        pytest.skip(f"backend {base} does not work on this machine: {probes[base].detail}")
    if name.endswith("+landlock") and sandbox_module.landlock_abi() < 1:
        pytest.skip("no Landlock in this kernel, so no second layer to test")
    return Sandbox(backend=base, landlock_layer=name.endswith("+landlock"))


@pytest.fixture(params=VARIANTS)
def sandbox(request) -> Sandbox:
    return _variant_or_skip(request.param)


@pytest.fixture
def workspace(tmp_path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def outside():
    """A directory outside the workspace that commands can see (not under /tmp, which bwrap
    replaces), so a refused write proves the refusal and not mere invisibility."""
    path = Path(tempfile.mkdtemp(prefix="agentkit-outside-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def child_processes() -> set[int]:
    """PIDs of this process's children (from /proc/<pid>/stat's ppid field)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(stat[1]) == os.getpid():
                found.add(int(entry))
    return found


def unique_sleep() -> str:
    """A sleep duration nobody else uses, to find our processes in /proc."""
    return f"{700 + os.getpid() % 97}.{time.monotonic_ns() % 10**7:07d}"


async def test_loopback_connect_to_a_listener_outside_is_blocked(sandbox, workspace):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        connect = (
            f"{sys.executable} -I -S -c "
            f'\'import socket; socket.create_connection(("127.0.0.1", {port}), 3); print("connected")\''
        )
        blocked = await sandbox.run(connect, workspace, network=False, timeout=20)
        allowed = await sandbox.run(connect, workspace, network=True, timeout=20)
    assert blocked.exit_code != 0, blocked
    assert "connected" not in blocked.stdout
    assert allowed.exit_code == 0 and "connected" in allowed.stdout, allowed  # control


async def test_write_outside_the_workspace_is_refused(sandbox, workspace, outside):
    target = outside / "escaped.txt"
    result = await sandbox.run(f"echo escaped > {target}", workspace, timeout=20)
    assert result.exit_code != 0
    assert not target.exists()  # the namespace backends do not even show `outside`
    # Refused where the path is shown (the system is shown read-only):
    result = await sandbox.run("touch /etc/agentkit-escape", workspace, timeout=20)
    assert result.exit_code != 0
    assert "Read-only file system" in result.stderr or "Permission denied" in result.stderr, result
    assert not Path("/etc/agentkit-escape").exists()
    # Next to the workspace: refused, or written to the private new root, never the host's.
    sibling = workspace.parent / "sibling.txt"
    await sandbox.run(f"touch {sibling}", workspace, timeout=20)
    assert not sibling.exists()


async def test_write_inside_the_workspace_works(sandbox, workspace):
    result = await sandbox.run(
        "mkdir -p pkg && echo hello > pkg/out.txt && mv pkg/out.txt pkg/moved.txt && "
        'echo tmp > "$TMPDIR/t" && cat "$TMPDIR/t" && echo home > "$HOME/h"',
        workspace,
        timeout=20,
    )
    assert result.exit_code == 0, result
    assert (workspace / "pkg" / "moved.txt").read_text() == "hello\n"
    assert result.stdout == "tmp\n"


async def test_extra_writable_paths_are_writable_and_nothing_else(sandbox, workspace, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    result = await sandbox.run(
        f"touch {cache}/a && touch b", workspace, writable=[cache], timeout=20
    )
    assert result.exit_code != 0  # the workspace itself was not listed
    assert (cache / "a").exists() and not (workspace / "b").exists()


async def test_environment_has_no_secret(sandbox, workspace, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("DATABASE_URL", "postgres://app:hunter2@db/app")
    monkeypatch.setenv("AGENTKIT_VISIBLE", "shown")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-test-secret")
    sandbox.env_passthrough = ("LANG", "AGENTKIT_VISIBLE", "GITHUB_TOKEN", "DATABASE_URL")
    result = await sandbox.run("env", workspace, timeout=20)
    assert result.exit_code == 0
    assert "sk-test-secret" not in result.stdout
    assert "OPENAI_API_KEY" not in result.stdout
    assert "ghp-test-secret" not in result.stdout  # listed, but looks like a secret
    assert "hunter2" not in result.stdout
    assert "AGENTKIT_VISIBLE=shown" in result.stdout  # control: pass-through works
    assert "PATH=" in result.stdout and "HOME=" in result.stdout


async def test_parent_environment_is_unreadable_through_proc(sandbox, workspace, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    # os.environ changes do not reach /proc/<pid>/environ, so ask a child that has the secret.
    holder = subprocess.Popen(["sleep", "30"], env={**os.environ})
    try:
        result = await sandbox.run(
            f"cat /proc/{holder.pid}/environ; cat /proc/{os.getpid()}/environ",
            workspace,
            timeout=20,
        )
    finally:
        holder.kill()
        holder.wait()
    assert "sk-test-secret" not in result.stdout


async def test_timeout_kills_a_bounded_fork_tree_and_escaped_children(sandbox, workspace):
    mark = unique_sleep()
    # 63 shells each sleeping, plus children that left the process group or were orphaned.
    script = (
        f'spawn() {{ if [ "$1" -gt 0 ]; then spawn $(($1 - 1)) & spawn $(($1 - 1)) & fi; '
        f"sleep {mark}; }}; setsid sleep {mark} & (sleep {mark} &); spawn 5"
    )
    started = time.monotonic()
    result = await sandbox.run(script, workspace, timeout=1.0)
    assert result.timed_out
    assert time.monotonic() - started < 10
    assert await wait_for_no_process(f"sleep\0{mark}", within=5) == []


async def test_sleep_999_is_killed_at_the_timeout(sandbox, workspace):
    mark = unique_sleep()
    result = await sandbox.run(f"sleep {mark}", workspace, timeout=0.5)
    assert result.timed_out and result.exit_code != 0
    assert result.duration < 6
    assert await wait_for_no_process(f"sleep\0{mark}", within=5) == []


async def test_background_children_die_when_the_command_ends(sandbox, workspace):
    mark = unique_sleep()
    result = await sandbox.run(f"sleep {mark} & echo started", workspace, timeout=20)
    assert result.exit_code == 0 and result.stdout == "started\n"
    assert not result.timed_out
    assert result.duration < 5  # the background child holding stdout does not stretch the run
    assert await wait_for_no_process(f"sleep\0{mark}", within=5) == []


async def test_cancelling_the_run_kills_the_command(sandbox, workspace):
    mark = unique_sleep()
    task = asyncio.ensure_future(sandbox.run(f"sleep {mark}", workspace, timeout=60))
    deadline = time.monotonic() + 10
    while not processes_matching(f"sleep\0{mark}") and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)  # a bound for a hang, not a figure under test
    assert await wait_for_no_process(f"sleep\0{mark}", within=5) == []


async def test_a_cancel_while_the_command_is_still_starting_kills_it_and_returns(
    sandbox, workspace
):
    """A cancel that lands while the process is being started (forked, its pipes not yet
    connected, because the loop was busy) must neither leave its tree running nor hang the
    cancelled caller. asyncio's own clean-up of a cancelled start kills only the direct child,
    then waits for the pipes that the orphaned command still holds: a hang for as long as the
    command runs (seen under load in `make test`)."""
    mark = unique_sleep()
    before = child_processes()
    task = asyncio.ensure_future(sandbox.run(f"sleep {mark}", workspace, timeout=60))
    for _ in range(200):  # the loop's turns until the run has forked its process, no more
        await asyncio.sleep(0)
        if child_processes() - before:
            break
    deadline = time.monotonic() + 20
    while not processes_matching(f"sleep\0{mark}") and time.monotonic() < deadline:
        time.sleep(0.02)  # the loop stays busy (as on a loaded machine) while the command starts
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)  # a bound for the hang, not a figure under test
    assert await wait_for_no_process(f"sleep\0{mark}", within=5) == []


async def test_huge_output_is_capped_head_and_tail(sandbox, workspace):
    sandbox.max_output_bytes = 64 * 1024
    result = await sandbox.run(
        "echo FIRST; head -c 20000000 /dev/zero | tr '\\0' x; echo; echo LAST",
        workspace,
        timeout=30,
    )
    assert result.exit_code == 0
    assert result.truncated
    assert len(result.stdout) < 70 * 1024
    assert result.stdout.startswith("FIRST\n") and result.stdout.endswith("LAST\n")
    assert "bytes of output omitted" in result.stdout


async def test_exit_code_stdout_and_stderr_are_reported(sandbox, workspace):
    result = await sandbox.run("echo out; echo err >&2; exit 3", workspace, timeout=20)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.backend == sandbox.label
    assert not result.timed_out


async def test_argv_commands_run_without_a_shell(sandbox, workspace):
    result = await sandbox.run(["printf", "%s|", "a b", "$HOME"], workspace, timeout=20)
    assert result.stdout == "a b|$HOME|"


async def test_the_agentkit_python_and_pytest_work_inside(sandbox, workspace):
    (workspace / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    result = await sandbox.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        workspace,
        timeout=60,
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert result.exit_code == 0, result.combined_output()
    assert "1 passed" in result.stdout


async def test_no_working_backend_refuses_with_install_hint(monkeypatch, workspace):
    none_work = tuple(BackendProbe(name, False, "missing") for name in sandbox_module.BACKENDS)
    monkeypatch.setattr("apps.engine.sandbox.properties.probe_backends", lambda: none_work)
    for mode in ("auto", "required"):
        box = Sandbox(mode=mode)
        assert not box.available
        with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
            await box.run("true", workspace)
    with pytest.raises(SandboxUnavailable, match="not available"):
        Sandbox(backend="bwrap")


async def test_mode_off_runs_unconfined_only_when_chosen(workspace, outside):
    box = Sandbox(mode="off")
    assert box.label == "none" and not box.confined
    result = await box.run(f"echo x > {outside}/written", workspace, timeout=20)
    assert result.exit_code == 0 and (outside / "written").exists()
    assert result.backend == "none"


def test_auto_mode_picks_the_first_working_backend():
    working = [probe.name for probe in probe_backends() if probe.available]
    if not working:
        pytest.skip("no backend works here")
    assert Sandbox().backend == working[0]
    assert probe_backends() is probe_backends()  # detected once per process


async def test_check_isolation_fails_for_the_unconfined_mode():
    report = await sandbox_module.check_isolation(Sandbox(mode="off"), timeout=10)
    failed = {check.name for check in report.checks if not check.passed}
    assert not report.passed
    assert any("network" in name for name in failed)
    assert any("outside" in name for name in failed)
    assert any("children" in name for name in failed)  # setsid escapes an unconfined run


# ── as an unprivileged user ────────────────────────────────────────────────────────────────────
UNPRIVILEGED_SCRIPT = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from apps.engine.sandbox import Sandbox, check_isolation, probe_backends
async def main():
    out = {"probes": [p.__dict__ for p in probe_backends()], "reports": []}
    for probe in probe_backends():
        if probe.available:
            report = await check_isolation(Sandbox(backend=probe.name), timeout=20)
            out["reports"].append(report.as_dict())
    print(json.dumps(out))
asyncio.run(main())
"""


def _unprivileged_python() -> tuple[list[str], str] | tuple[None, str]:
    """A `setpriv` prefix + a Python that the `nobody` user can run, or the reason there is none."""
    if os.geteuid() != 0:
        return (
            None,
            "tests already run unprivileged: every other test here is the unprivileged test",
        )
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return None, "setpriv (util-linux) is missing, cannot switch to an unprivileged user"
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    reasons = []
    for python in dict.fromkeys([sys.executable, "/usr/bin/python3", shutil.which("python3")]):
        if not python:
            continue
        probe = subprocess.run(
            [
                *prefix,
                "/bin/sh",
                "-c",
                f'{python} -c "import sys; sys.path.insert(0, \\"{ROOT}\\"); import apps.engine.sandbox"',
            ],
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
        )
        if probe.returncode == 0:
            return [*prefix, python], ""
        reasons.append(f"{python}: {probe.stderr.strip()[-200:]}")
    return None, "no Python the nobody user can run: " + "; ".join(reasons)


def test_isolation_holds_for_an_unprivileged_user():
    command, reason = _unprivileged_python()
    if command is None:
        print(f"SKIPPED unprivileged sandbox test: {reason}")
        pytest.skip(reason)
    done = subprocess.run(
        [*command, "-c", UNPRIVILEGED_SCRIPT, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-test-secret", "LANG": "C.UTF-8"},
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout.strip().splitlines()[-1])
    working = [probe["name"] for probe in payload["probes"] if probe["available"]]
    print("unprivileged backends:", payload["probes"])
    assert working, f"no backend works for an unprivileged user: {payload['probes']}"
    assert [report["backend"] for report in payload["reports"]] == working
    for report in payload["reports"]:
        assert report["passed"], json.dumps(report, indent=2)
        assert {check["property"] for check in report["checks"]} == set(PROPERTIES)
        statuses = {name: p["status"] for name, p in report["properties"].items()}
        assert "FAILS" not in statuses.values(), statuses
        if report["backend"] in ("bwrap", "unshare"):  # unprivileged, everything holds
            assert set(statuses.values()) == {"holds"}, json.dumps(report, indent=2)
