"""The engine must stay framework-free and free of import cycles: lint-imports has to fail when
someone imports django there or makes two engine modules import each other."""

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
    for package in ("apps", "devtools"):
        shutil.copytree(
            ROOT / package, target / package, ignore=shutil.ignore_patterns("__pycache__")
        )
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


def test_a_function_level_import_cycle_across_engine_packages_breaks_the_contract(tmp_path):
    repo = copy_tree(tmp_path)
    events = repo / "apps" / "engine" / "events.py"  # the loop imports events
    events.write_text(
        events.read_text()
        + "\n\ndef engine():\n    from apps.engine.loop.react import ReActEngine\n\n"
        "    return ReActEngine\n"
    )
    proc = lint(repo)
    assert proc.returncode != 0
    assert "no import cycle between the modules of apps.engine BROKEN" in proc.stdout
    assert "apps.engine.events -> apps.engine.loop.react" in proc.stdout


def test_two_modules_of_one_engine_package_importing_each_other_break_both_contracts(tmp_path):
    repo = copy_tree(tmp_path)
    spec = repo / "apps" / "engine" / "plan" / "spec.py"  # the planner imports spec
    spec.write_text(
        spec.read_text() + "\nfrom apps.engine.plan import planner  # noqa: E402, F401\n"
    )
    proc = lint(repo)
    assert proc.returncode != 0
    assert "apps.engine.plan.spec -> apps.engine.plan.planner" in proc.stdout
    assert "no import cycle inside any package of apps.engine BROKEN" in proc.stdout
