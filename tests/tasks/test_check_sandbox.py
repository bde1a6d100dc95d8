"""`manage.py check_sandbox` as a user runs it: a real process, the real sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from apps.engine.sandbox import available_backends
from tests.support import ROOT


def check_sandbox(tmp_path, *args: str, config: str | None = None):
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
        [sys.executable, "manage.py", "check_sandbox", *args],
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
    assert all(check["passed"] for r in payload["reports"] for check in r["checks"])


def test_unconfined_mode_fails_the_check(tmp_path):
    done = check_sandbox(tmp_path, config='sandbox:\n  mode: "off"\n')
    assert done.returncode != 0
    assert "FAIL  network" in done.stdout
    assert "FAIL  filesystem: write outside" in done.stdout
    assert "isolation does NOT hold" in done.stderr
    assert "mode is off" in done.stderr
