"""`manage.py check_sandbox` as a user runs it: a real process, the real sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from apps.engine.sandbox import PROPERTIES, Sandbox, available_backends
from tests.support import ROOT

pytestmark = pytest.mark.slow  # spawns processes: started early (tests/conftest.py)


def check_sandbox(tmp_path, *args: str, config: str | None = None, command="check_sandbox"):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        AGENTKIT_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        OPENAI_API_KEY="sk-test-secret",
    )
    if config is not None:
        path = tmp_path / "agentkit.yaml"
        path.write_text(config)
        env["AGENTKIT_CONFIG"] = str(path)
    return subprocess.run(
        [sys.executable, "manage.py", command, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_reports_the_backend_and_proves_isolation(tmp_path):
    done = check_sandbox(tmp_path)
    if not available_backends():
        pytest.skip("no sandbox backend works here; see the refusal test")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"backend: {available_backends()[0]}" in out
    for line in (
        "PASS  network: loopback connect to a listener outside is blocked",
        "PASS  filesystem: write outside the workspace is refused",
        "PASS  filesystem: write inside the workspace works",
        "PASS  environment: no secret reaches the command",
        "PASS  timeout: the command and all its children are killed",
    ):
        assert line in out
    assert "FAIL" not in out


def test_json_for_every_working_backend(tmp_path):
    done = check_sandbox(tmp_path, "--all", "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["passed"] is True
    assert [r["backend"] for r in payload["reports"]] == available_backends()
    for report in payload["reports"]:
        statuses = report["properties"]
        assert {p["status"] for p in statuses.values()} <= {"holds", "not held"}, report
        held = {name for name, p in statuses.items() if p["status"] == "holds"}
        for check in report["checks"]:  # every property a backend claims is proven
            assert check["passed"] or check["property"] not in held, check
        if report["backend"] in ("bwrap", "unshare"):
            assert held == set(PROPERTIES), statuses


def test_table_per_backend_and_property_says_what_a_backend_cannot_hold(tmp_path):
    done = check_sandbox(tmp_path, "--all")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("property"))
    assert header.split()[1:] == available_backends()
    for name in PROPERTIES:
        row = next(line for line in lines if line.startswith(name + " "))
        if "bwrap" in available_backends():
            assert row.split()[1] == "holds", row
    if "landlock" in available_backends() and os.geteuid() == 0:
        assert "unprivileged_user  not held: agentkit runs as root" in done.stdout
        assert "landlock cannot hold what sandbox.require asks: unprivileged_user, limits" in (
            done.stdout
        )


def test_a_backend_missing_a_required_property_fails_the_check(tmp_path):
    if "landlock" not in available_backends() or os.geteuid() != 0:
        pytest.skip("needs Landlock and root, where Landlock cannot run as another uid")
    config = "sandbox:\n  mode: required\n  backends: [landlock]\n  require: [unprivileged_user]\n"
    done = check_sandbox(tmp_path, config=config)
    assert done.returncode != 0
    assert "landlock cannot hold unprivileged_user: agentkit runs as root" in done.stderr
    done = check_sandbox(tmp_path, config=config, command="check")
    assert done.returncode != 0
    assert "agentkit.E002" in done.stderr and "unprivileged_user" in done.stderr
    relaxed = config.replace("[unprivileged_user]", "[no_network, hidden_host_files]")
    assert check_sandbox(tmp_path, config=relaxed, command="check").returncode == 0


def test_unconfined_mode_fails_the_check(tmp_path):
    done = check_sandbox(tmp_path, config='sandbox:\n  mode: "off"\n')
    assert done.returncode != 0
    assert "FAIL  network" in done.stdout
    assert "FAIL  filesystem: write outside" in done.stdout
    assert "FAIL  files: .secret_key is unreadable" in done.stdout
    assert "isolation does NOT hold" in done.stderr
    assert "mode is off" in done.stderr


def test_shows_the_memory_cap_how_it_is_enforced_and_proves_it(tmp_path):
    if not available_backends():
        pytest.skip("no sandbox backend works here; see the refusal test")
    config = "sandbox:\n  limits:\n    memory_mb: 384\n"
    mode, how = Sandbox().memory_limit_mode()  # cgroup as root here; rlimit unprivileged
    done = check_sandbox(tmp_path, config=config)
    assert done.returncode == 0, done.stderr
    assert f"sandbox.limits.memory_mb: 384 MiB per command, enforced by {mode}: {how}" in (
        done.stdout
    )
    assert f"memory: {how}" in done.stdout  # in the limits property's detail
    via = "the tree's cgroup" if mode == "cgroup" else "RLIMIT_AS"
    assert f"PASS  limits: writing 512 MB of memory stops at 256 MB ({via})" in done.stdout
    if mode == "cgroup":
        assert "PASS  limits: two processes of 160 MB each stop at 256 MB together" in done.stdout

    payload = json.loads(check_sandbox(tmp_path, "--json", config=config).stdout)
    assert payload["memory"] == {"detail": how, "enforced_by": mode, "limit_mb": 384}
