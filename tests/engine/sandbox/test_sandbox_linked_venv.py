"""A virtualenv reached through a symbolic link (issue 27): agentkit started from an installation
whose `.venv` links to where the venv really lives verifies a workspace in the sandbox as it does
from the venv folder itself; a workspace `.venv` linking outside the workspace (which commands
cannot see) falls back to agentkit's tools instead of failing to execute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apps.engine.config import VerificationConfig
from apps.engine.plan.verify.run import Verifier
from apps.engine.sandbox import Exposure, Sandbox
from tests.engine.sandbox_support import BACKENDS_HERE
from tests.support import ROOT

VENV = Path(sys.prefix)  # agentkit's own venv, a real folder
VERIFY = """
import asyncio, json, sys
from pathlib import Path
from apps.engine.sandbox import Exposure, Sandbox
from apps.engine.plan.verify.run import Verifier
backend, install, workspace = sys.argv[1:4]
box = Sandbox(backend=backend, exposure=Exposure(installation_root=Path(install)))
result = asyncio.run(Verifier(box).verify(workspace))
print(json.dumps({"passed": result.passed, "log": result.log, "prefix": sys.prefix}))
"""


def project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "test_sum.py").write_text("def test_sum():\n    assert sum([1, 2]) == 3\n")
    return root


def verify_with(python: Path, backend: str, install: Path, workspace: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run(
        [str(python), "-c", VERIFY, backend, str(install), str(workspace)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("backend", BACKENDS_HERE)
def test_a_linked_venv_verifies_as_the_venv_folder_does(tmp_path, backend):
    install = tmp_path / "install"  # the installation the sandbox hides, .venv a link in it
    install.mkdir()
    (install / ".venv").symlink_to(VENV, target_is_directory=True)
    workspace = project(tmp_path / "work" / "ws")

    linked = verify_with(install / ".venv" / "bin" / "python", backend, install, workspace)
    assert linked["prefix"] == str(install / ".venv")  # Python took the link as its venv
    assert linked["passed"], linked["log"]
    assert "1 passed" in linked["log"]

    copied = verify_with(VENV / "bin" / "python", backend, install, workspace)
    assert copied["passed"], copied["log"]


@pytest.mark.parametrize("backend", BACKENDS_HERE)
async def test_a_workspace_venv_linked_outside_falls_back_to_agentkits_tools(tmp_path, backend):
    elsewhere = tmp_path / "elsewhere-venv"  # a venv commands cannot see: not a tool-chain
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(elsewhere)], check=True)
    site = next((elsewhere / "lib").glob("python3*")) / "site-packages"
    (site / "pytest").mkdir(parents=True)  # looks as if it had pytest
    workspace = project(tmp_path / "ws")
    (workspace / ".venv").symlink_to(elsewhere, target_is_directory=True)
    box = Sandbox(backend=backend, exposure=Exposure(installation_root=tmp_path / "install"))
    verifier = Verifier(box, VerificationConfig(python_commands=["pytest -q"]))
    result = await verifier.verify(workspace)
    assert result.passed, result.log
    assert "1 passed" in result.log
