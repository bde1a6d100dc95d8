"""What a command can see, through every backend that works here, with real commands: not the
agentkit installation's secret key and database, not another workspace, not /etc/shadow, not a
Unix socket of the host; the tool-chains it needs still run; it is not root."""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from apps.engine.sandbox import SandboxUnavailable, probe_backends
from tests.engine.sandbox_support import BACKENDS_HERE, box_for, fake_installation, holds


@pytest.fixture(params=BACKENDS_HERE)
def setup(request, tmp_path):
    paths = fake_installation(tmp_path)
    return box_for(request.param, paths["install"]), paths


def test_bubblewrap_works_when_running_as_root():
    """`make test` runs as root and installs bubblewrap: the best backend must work there, or
    every other test here would quietly run on a weaker one (or none)."""
    probes = {probe.name: probe for probe in probe_backends()}
    if os.geteuid() != 0:
        pytest.skip(f"not root: bubblewrap may be unavailable here ({probes['bwrap'].detail})")
    assert probes["bwrap"].available, probes["bwrap"].detail
    assert probes["unshare"].available, probes["unshare"].detail


async def test_installation_secret_and_database_are_unreadable(setup):
    box, paths = setup
    install = paths["install"]
    result = await box.run(
        f"cat {install}/.secret_key; cat {install}/db.sqlite3; ls -a {install}",
        paths["workspace"],
        timeout=20,
    )
    assert "fake-secret-key" not in result.stdout
    assert "fake-database" not in result.stdout
    assert ".secret_key" not in result.stdout and "db.sqlite3" not in result.stdout
    refused = await box.run(["cat", str(install / ".secret_key")], paths["workspace"])
    assert refused.exit_code != 0 and refused.stdout == ""


async def test_another_workspace_is_unreadable(setup):
    box, paths = setup
    other = paths["other"]
    result = await box.run(
        f"cat {other}/private.txt; ls {other.parent}", paths["workspace"], timeout=20
    )
    assert "other-workspace-content" not in result.stdout
    assert "other" not in result.stdout.split()


async def test_the_real_checkout_and_etc_shadow_are_unreadable(setup):
    box, paths = setup
    root = Path(__file__).resolve().parents[3]  # this agentkit checkout
    result = await box.run(
        f"cat {root}/pyproject.toml; cat /etc/shadow; ls -A /root /home",
        paths["workspace"],
        timeout=20,
    )
    assert "[project]" not in result.stdout
    shadow = Path("/etc/shadow")
    if os.access(shadow, os.R_OK) and shadow.read_text().strip():
        assert shadow.read_text().splitlines()[0] not in result.stdout
    # Only the tool-chain (a Python under /root/.pyenv, say) may show in a home.
    assert set(result.stdout.split()) <= {"/root:", "/home:", ".pyenv"}, result.stdout


async def test_host_unix_sockets_are_unreachable(setup, tmp_path):
    box, paths = setup
    host_tmp = Path(tempfile.mkdtemp(prefix="agentkit-sock-", dir="/tmp"))
    names = [
        str(tmp_path / "outside.sock"),  # next to the workspace, outside it
        str(host_tmp / "redis.sock"),  # the host /tmp
        f"\0agentkit-test-{os.getpid()}",  # abstract
    ]
    servers = []
    try:
        for name in names:
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(name)
            server.listen(4)
            server.setblocking(False)
            servers.append(server)
            if not name.startswith("\0"):
                os.chmod(name, 0o777)
            code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({name!r}); print('connected')"
            result = await box.run([sys.executable, "-I", "-S", "-c", code], paths["workspace"])
            assert "connected" not in result.stdout, (name, result)
            with pytest.raises(BlockingIOError):
                server.accept()
    finally:
        for server in servers:
            server.close()
        for name in names[:2]:
            Path(name).unlink(missing_ok=True)
        host_tmp.rmdir()


async def test_command_is_not_root_and_its_files_stay_agentkits(setup):
    box, paths = setup
    workspace = paths["workspace"]
    result = await box.run("id -u > uid.txt; echo made > made.txt", workspace, timeout=20)
    assert result.exit_code == 0, result
    made = workspace / "made.txt"
    assert made.stat().st_uid == os.geteuid()  # agentkit can edit what the command wrote
    with made.open("a") as handle:
        handle.write("edited by agentkit\n")
    inside_uid = (workspace / "uid.txt").read_text().strip()
    if holds(box, "unprivileged_user"):
        assert inside_uid != "0"
    else:  # Landlock as root: said, not hidden
        assert inside_uid == "0" and os.geteuid() == 0
        assert "runs as root" in box.properties()["unprivileged_user"][1]


async def test_agentkit_venv_runs_pytest_and_ruff_on_the_workspace(setup):
    box, paths = setup
    workspace = paths["workspace"]
    (workspace / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    bin_dir = Path(sys.executable).parent
    result = await box.run(
        f"{sys.executable} -m pytest -q -p no:cacheprovider && {bin_dir}/ruff check "
        "--no-cache test_ok.py",
        workspace,
        timeout=60,
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert result.exit_code == 0, result.combined_output()
    assert "1 passed" in result.stdout and "All checks passed" in result.stdout


async def test_a_workspace_that_contains_the_installation_is_refused(setup):
    box, paths = setup
    with pytest.raises(SandboxUnavailable, match="contains"):
        await box.run("true", paths["install"].parent)
    with pytest.raises(SandboxUnavailable, match="contains"):
        await box.run("true", paths["workspace"], writable=[paths["install"] / "var"])


async def test_a_workspace_that_contains_the_servers_var_dir_is_refused(setup, monkeypatch):
    box, paths = setup
    var = paths["install"].parent / "elsewhere" / "var"
    (var / "workspaces" / "w").mkdir(parents=True)
    monkeypatch.setenv("AGENTKIT_VAR_DIR", str(var))
    with pytest.raises(SandboxUnavailable, match="contains"):
        await box.run("true", var.parent)
    result = await box.run("pwd", var / "workspaces" / "w")  # a workspace inside is fine
    assert result.exit_code == 0, result


async def test_a_repository_cannot_name_folders_to_show_through_its_venv(setup, tmp_path):
    box, paths = setup
    secret_dir = tmp_path / "host-secrets"
    (secret_dir / "bin").mkdir(parents=True)
    (secret_dir / "bin" / "token.txt").write_text("host-token-456\n")
    workspace = paths["workspace"]
    (workspace / ".venv").symlink_to(secret_dir)  # a .venv that is a symlink out
    (workspace / "venv2").mkdir()
    (workspace / "venv2" / "pyvenv.cfg").write_text(f"home = {secret_dir / 'bin'}\n")
    result = await box.run(
        f"cat .venv/bin/token.txt {secret_dir}/bin/token.txt", workspace, timeout=20
    )
    assert "host-token" not in result.stdout
