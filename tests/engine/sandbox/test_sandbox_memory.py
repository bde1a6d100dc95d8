"""The memory cap of a sandboxed command tree (issue 27), through every backend that works here,
with real allocations: a memory cgroup where one can be made (as root here and in CI), the
RLIMIT_AS fallback forced with `memory_cgroup=False`. A command over the cap ends with the
memory_limit advice and the host stays responsive; a command under it is unaffected."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from apps.engine.config import SandboxConfig
from apps.engine.sandbox import Exposure, Limits, Sandbox
from apps.engine.sandbox.cgroups import CommandCgroup
from tests.engine.sandbox_support import BACKENDS_HERE, fake_installation, host_responsive_while

FOUR_GIB = "python3 -c \"b=b'x'*(4<<30)\""  # the command: writes every byte


def memory_by_cgroup_here() -> bool:
    return Sandbox(memory_cgroup=True).memory_limit_mode()[0] == "cgroup"


needs_cgroup = pytest.mark.skipif(
    not memory_by_cgroup_here(),
    reason="no memory cgroup can be made here (unprivileged, or the controller is not "
    "delegated); the RLIMIT_AS fallback tests still run",
)


def box(backend: str, install: Path, *, memory_cgroup: bool, **limits: int) -> Sandbox:
    return Sandbox(
        backend=backend,
        exposure=Exposure(installation_root=install),
        limits=Limits(**limits),
        memory_cgroup=memory_cgroup,
    )


@pytest.fixture(params=BACKENDS_HERE)
def paths(request, tmp_path) -> tuple[str, Path, Path]:
    made = fake_installation(tmp_path)
    return request.param, made["install"], made["workspace"]


@needs_cgroup
async def test_four_gib_is_refused_with_memory_limit_by_the_cgroup(paths):
    backend, install, workspace = paths
    sandbox = box(backend, install, memory_cgroup=True)  # default limits: 2048 MiB, AS 8 GiB
    result, _ = await host_responsive_while(
        sandbox.run(FOUR_GIB, workspace, timeout=60), at_least_ticks=10
    )
    assert result.memory_cap == "cgroup"
    assert result.exit_code == 137 and not result.ok, result  # OOM-killed, not MemoryError
    assert "needed more than 2048 MiB" in result.memory_error
    assert "raise sandbox.limits.memory_mb" in result.memory_error


async def test_four_gib_is_refused_with_memory_limit_under_the_rlimit_fallback(paths):
    backend, install, workspace = paths
    sandbox = box(backend, install, memory_cgroup=False)
    assert sandbox.memory_limit_mode()[0] == "rlimit"
    result, _ = await host_responsive_while(
        sandbox.run(FOUR_GIB, workspace, timeout=60), at_least_ticks=10
    )
    assert result.memory_cap == "rlimit"
    assert result.exit_code == 1 and "MemoryError" in result.stderr, result
    assert "cap of 2048 MiB of address space per process" in result.memory_error
    assert "raise sandbox.limits.memory_mb" in result.memory_error


@pytest.mark.parametrize("memory_cgroup", [True, False])
async def test_a_command_under_the_cap_is_unaffected(paths, memory_cgroup):
    backend, install, workspace = paths
    sandbox = box(backend, install, memory_cgroup=memory_cgroup, memory_mb=512)
    result = await sandbox.run("python3 -c \"b=b'x'*(300<<20); print(len(b)>>20)\"", workspace)
    assert result.ok and result.stdout == "300\n" and result.memory_error == "", result


@needs_cgroup
async def test_the_cap_is_on_the_whole_tree_not_each_process(paths):
    """Three processes of 120 MiB each stay under a per-process cap of 256 MiB, not together."""
    backend, install, workspace = paths
    sandbox = box(backend, install, memory_cgroup=True, memory_mb=256)
    hold = "python3 -c \"import time; b=b'x'*(120<<20); time.sleep(3)\""
    result = await sandbox.run(f"{hold} & {hold} & {hold} & wait; echo finished", workspace)
    # The shell itself ends well (a killed child does not stop `wait`); the cgroup counted it.
    assert result.exit_code == 0 and "finished" in result.stdout
    assert not result.ok and "needed more than 256 MiB" in result.memory_error


@needs_cgroup
async def test_a_command_that_hides_the_kill_still_gets_memory_limit(paths):
    backend, install, workspace = paths
    sandbox = box(backend, install, memory_cgroup=True, memory_mb=128)
    result = await sandbox.run(
        "python3 -c \"b=b'x'*(512<<20)\" 2>/dev/null; exit 0", workspace, timeout=30
    )
    assert result.exit_code == 0 and result.memory_error, result


@pytest.mark.parametrize("memory_cgroup", [True, False])
async def test_one_process_over_its_address_space_gets_memory_limit_naming_it(paths, memory_cgroup):
    """address_space_mb below memory_mb: RLIMIT_AS refuses first, whichever caps the tree."""
    backend, install, workspace = paths
    sandbox = box(
        backend, install, memory_cgroup=memory_cgroup, address_space_mb=512, memory_mb=2048
    )
    result = await sandbox.run('python3 -c "b=bytearray(1<<30)"', workspace, timeout=30)
    assert result.exit_code == 1 and "MemoryError" in result.stderr, result
    assert "cap of 512 MiB of address space per process" in result.memory_error
    assert "raise sandbox.limits.address_space_mb" in result.memory_error


async def test_talk_of_memory_errors_is_not_a_memory_limit(paths):
    backend, install, workspace = paths
    sandbox = box(backend, install, memory_cgroup=False)
    said = await sandbox.run("echo 'MemoryError: out of memory' >&2", workspace)
    assert said.ok and said.memory_error == ""  # exit 0: nothing failed
    failed = await sandbox.run("echo 'no such file' >&2; exit 3", workspace)
    assert failed.exit_code == 3 and failed.memory_error == ""


def test_memory_mb_comes_from_the_configuration_and_is_validated():
    sandbox = Sandbox.from_config(SandboxConfig(limits={"memory_mb": 768}))
    assert sandbox.limits.memory_mb == 768
    assert Sandbox.from_config(SandboxConfig()).limits.memory_mb == 2048
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxConfig(limits={"memory_mb": 16})


def test_the_fallback_lowers_rlimit_as_to_the_memory_cap():
    limits = Limits(address_space_mb=8192, memory_mb=2048)
    assert limits.address_space_cap(memory_cgroup=True) == 8192
    assert limits.address_space_cap(memory_cgroup=False) == 2048
    assert "--as=2147483648:2147483648" in limits.prlimit_argv(
        "prlimit", nproc=None, memory_cgroup=False
    )


@needs_cgroup
def test_a_memory_cgroup_counts_its_oom_kill_and_is_removed_afterwards():
    group = CommandCgroup.create(memory_mb=64)
    assert group is not None and group.caps_memory and not group.caps_processes
    done = subprocess.run(
        [*group.argv(), "python3", "-c", "b = b'x' * (256 << 20)"], capture_output=True
    )
    assert done.returncode == -9 and group.oom_kills() == 1  # SIGKILL from the OOM killer
    assert group.remove()
    assert group.paths and not any(path.exists() for path in group.paths)
