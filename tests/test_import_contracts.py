"""The engine must stay framework-free: lint-imports has to fail when someone imports django there."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT

LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def copy_tree(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    target.mkdir()
    shutil.copy(ROOT / "pyproject.toml", target)
    shutil.copytree(ROOT / "apps", target / "apps", ignore=shutil.ignore_patterns("__pycache__"))
    return target


def lint(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(repo)},
    )


def test_contracts_hold_on_the_tree(tmp_path):
    proc = lint(copy_tree(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "BROKEN" not in proc.stdout


def test_importing_django_inside_the_engine_breaks_the_contract(tmp_path):
    repo = copy_tree(tmp_path)
    (repo / "apps" / "engine" / "sneaky.py").write_text("from django.conf import settings\n")
    proc = lint(repo)
    assert proc.returncode != 0
    assert "apps.engine.sneaky -> django" in proc.stdout
