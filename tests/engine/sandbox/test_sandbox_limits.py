"""Limits through every backend that works here, with real commands and small limits: a fork
storm, a memory hog, a CPU burner and disk fillers are capped, and the host stays responsive.
Then `sandbox.require`: a backend that cannot hold a required property is never chosen."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from apps.engine.sandbox import (
    PROPERTIES,
    Limits,
    Sandbox,
    SandboxUnavailable,
    backend_properties,
    wait_for_no_process,
)
from apps.engine.sandbox.cgroups import CommandCgroup
from apps.engine.sandbox.properties import process_limit_mode
from tests.engine.sandbox_support import (
    BACKENDS_HERE,
    SMALL,
    box_for,
    fake_installation,
    holds,
    host_responsive_while,
)

PY = [sys.executable, "-I", "-S", "-c"]


@pytest.fixture(params=BACKENDS_HERE)
def setup(request, tmp_path):
    paths = fake_installation(tmp_path)
    return box_for(request.param, paths["install"]), paths["workspace"]


async def test_fork_storm_is_capped_and_the_host_stays_responsive(setup):
    box, workspace = setup
    mark = f"{800 + os.getpid() % 97}.{time.monotonic_ns() % 10**6:06d}"
    storm = (
        "import os, subprocess, time\nn = 0\nfor _ in range(400):\n    try:\n"
        f"        subprocess.Popen(['sleep', '{mark}']); n += 1\n"
        "    except OSError:\n        break\nprint(n, flush=True)\ntime.sleep(60)"
    )
    result, _ = await host_responsive_while(
        box.run([*PY, storm], workspace, timeout=3), at_least_ticks=20
    )
    assert result.timed_out
    started = int(result.stdout.split()[0])
    assert started < SMALL.processes, result  # the pids cap, not the loop bound, stopped it
    assert await wait_for_no_process(f"sleep\0{mark}", within=5) == []


async def test_classic_fork_bomb_ends_at_the_timeout(setup):
    box, workspace = setup
    result, _ = await host_responsive_while(
        box.run("bomb() { bomb | bomb & }; bomb; sleep 30", workspace, timeout=2),
        at_least_ticks=20,
    )
    assert result.timed_out and result.duration < 15


async def test_memory_hog_fails_and_the_host_is_unaffected(setup):
    box, workspace = setup
    hog = f"b = bytearray({SMALL.address_space_mb * 2} << 20); print('allocated')"
    result, _ = await host_responsive_while(
        box.run([*PY, hog], workspace, timeout=20), at_least_ticks=10
    )
    assert result.exit_code != 0 and "allocated" not in result.stdout
    assert "MemoryError" in result.stderr


async def test_cpu_burner_is_stopped_by_the_cpu_limit(setup, tmp_path):
    _, workspace = setup
    box = box_for(
        setup[0].backend, fake_installation(tmp_path / "x")["install"], Limits(cpu_seconds=1)
    )
    result = await box.run([*PY, "while True: pass"], workspace, timeout=30)
    assert not result.timed_out and result.duration < 20
    assert result.exit_code == 128 + 24, result  # SIGXCPU


async def test_filling_the_workspace_stops_at_the_file_size_limit(setup):
    box, workspace = setup
    result = await box.run(
        f"head -c {(SMALL.file_size_mb + 8) << 20} /dev/zero > big.bin", workspace, timeout=20
    )
    assert result.exit_code != 0
    assert (workspace / "big.bin").stat().st_size <= SMALL.file_size_mb << 20


async def test_filling_tmp_stops_at_the_tmp_size(setup):
    box, workspace = setup
    result = await box.run(
        f"for i in $(seq {SMALL.tmp_size_mb + 8}); do "
        'head -c 1048576 /dev/zero > "/tmp/f.$i" || exit 1; done',
        workspace,
        timeout=20,
    )
    assert result.exit_code != 0  # tmpfs full (namespaces) or /tmp not writable (Landlock)
    if holds(box, "limits"):
        assert "No space left on device" in result.stderr, result
    else:
        assert box.backend == "landlock" and "Permission denied" in result.stderr, result
        assert "/tmp size: NOT capped" in box.properties()["limits"][1]


# ── sandbox.require ───────────────────────────────────────────────────────────────────────────
def test_every_backend_says_what_it_holds_for_every_property():
    for backend in BACKENDS_HERE:
        claims = backend_properties(backend)
        assert set(claims) == set(PROPERTIES)
        for name, (held, detail) in claims.items():
            assert detail, (backend, name)
            if backend in ("bwrap", "unshare"):
                assert held, (backend, name, detail)


def test_a_backend_that_cannot_hold_a_required_property_is_not_chosen():
    if "landlock" not in BACKENDS_HERE or os.geteuid() != 0:
        pytest.skip("needs Landlock and root (where Landlock cannot drop to another uid)")
    box = Sandbox(backends=["landlock", "bwrap"], require=["unprivileged_user"])
    assert box.backend == "bwrap"
    box = Sandbox(backends=["landlock"], require=["unprivileged_user"])
    assert not box.available
    assert "landlock cannot hold unprivileged_user: agentkit runs as root" in (
        box.unavailable_reason or ""
    )
    with pytest.raises(SandboxUnavailable, match="/tmp size: NOT capped"):
        Sandbox(backend="landlock", require=["limits"])


def test_network_on_gives_up_no_host_sockets_for_namespace_backends():
    claims = backend_properties("bwrap", network=True)
    assert claims["no_network"][0] is False
    assert claims["no_host_sockets"] == (
        False,
        "with the network on, abstract Unix sockets of the host are reachable",
    )
    with pytest.raises(ValueError, match="unknown sandbox properties"):
        Sandbox(require=["no_such_thing"])


def test_a_pids_cgroup_caps_forks_and_is_removed_afterwards():
    if process_limit_mode()[0] != "cgroup":
        pytest.skip(f"processes are not capped by a cgroup here: {process_limit_mode()[1]}")
    group = CommandCgroup.create(max_pids=8)
    assert group is not None and group.caps_processes and not group.caps_memory
    proc = subprocess.Popen(
        [*group.argv(), "/bin/sh", "-c", "for i in $(seq 20); do sleep 30 & done; wait"],
        stderr=subprocess.PIPE,
    )
    time.sleep(1.0)  # the shell tries its 20 forks
    assert 1 < len(group.pids()) <= 8
    assert group.remove()
    _, err = proc.communicate(timeout=10)
    assert b"fork" in err.lower(), err  # the shell was refused more processes
    assert group.paths and not any(path.exists() for path in group.paths)
