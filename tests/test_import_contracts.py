"""The import contracts of pyproject.toml hold, and fail when broken: the engine stays
framework-free (no django there); no two modules anywhere in apps/ or agentkit_site import each
other, directly or not (devtools/import_contracts.py's acyclic_modules over grimp's whole graph,
function-level imports included; acyclic_siblings inside each package; and the module graph
checked here too: a cycle through two apps is not a sibling cycle)."""

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
    for package in ("apps", "agentkit_site", "devtools"):
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


def test_the_recorder_importing_the_consumers_again_breaks_the_contract(tmp_path):
    # The write path reaches the sockets through apps/tasks/events/local_delivery.py; the consumers sit
    # above it (consumers -> executors -> runner -> recorder).
    repo = copy_tree(tmp_path)
    recorder = repo / "apps" / "tasks" / "events" / "recorder.py"
    recorder.write_text(
        recorder.read_text() + "\nfrom apps.tasks.doors.consumers import ChatConsumer  # noqa\n"
    )
    proc = lint(repo)
    assert proc.returncode != 0
    assert "No cycles are allowed in apps.tasks." in proc.stdout
    assert "apps.tasks' events never import the doors BROKEN" in proc.stdout
    assert "apps.tasks' rooms sit in layers BROKEN" in proc.stdout


def test_a_door_importing_the_runner_breaks_the_contract(tmp_path):
    # The doors start a run through an executor; the API importing the runner itself closes no
    # cycle (the runner imports no door), so only the doors' contract sees it.
    repo = copy_tree(tmp_path)
    api = repo / "apps" / "tasks" / "doors" / "api.py"
    api.write_text(api.read_text() + "\nfrom apps.tasks.run.runner import run_task  # noqa\n")
    proc = lint(repo)
    assert proc.returncode != 0
    assert "the doors call services, never the runner's internals BROKEN" in proc.stdout
    assert "apps.tasks.doors.api -> apps.tasks.run.runner" in proc.stdout
    assert "apps.tasks' rooms sit in layers KEPT" in proc.stdout


def test_the_services_importing_the_run_break_the_layers(tmp_path):
    # services sit below the run (the executors call them): a service that imported the reaper
    # would reach up a layer, and close a cycle through apps.tasks' siblings.
    repo = copy_tree(tmp_path)
    services = repo / "apps" / "tasks" / "services.py"
    services.write_text(services.read_text() + "\nfrom apps.tasks.run import reaper  # noqa\n")
    proc = lint(repo)
    assert proc.returncode != 0
    assert "apps.tasks' rooms sit in layers BROKEN" in proc.stdout
    assert "apps.tasks.services -> apps.tasks.run.reaper" in proc.stdout


# Modules in import cycles, by grimp's graph (function-level imports count): one line per
# strongly connected component. apps.engine is left to its own contracts.
CYCLES_SCRIPT = """
import grimp
from devtools.import_contracts import strongly_connected
graph = grimp.build_graph("apps", "agentkit_site")
modules = {m for m in graph.modules if not m.startswith("apps.engine")}
edges = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
for component in strongly_connected(edges):
    print(" ".join(component))
"""


def module_cycles(repo: Path) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", CYCLES_SCRIPT],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(repo)},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_no_module_outside_the_engine_is_in_an_import_cycle(tmp_path):
    assert module_cycles(copy_tree(tmp_path)) == []


def test_a_cycle_through_two_apps_is_found(tmp_path):
    # specs below tasks' runner: a spec module that imported the task-ending path would close
    # specs.services -> tasks.ending -> specs.services, which no sibling contract sees.
    repo = copy_tree(tmp_path)
    services = repo / "apps" / "specs" / "services.py"
    services.write_text(services.read_text() + "\nfrom apps.tasks.events import ending  # noqa\n")
    assert module_cycles(repo) == ["apps.specs.services apps.tasks.events.ending"]
    proc = lint(repo)
    assert proc.returncode != 0
    assert "the specs' domain sits below the tasks' run machinery BROKEN" in proc.stdout
    assert "no import cycle between the modules of apps and agentkit_site BROKEN" in proc.stdout


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
    assert "no import cycle between the modules of apps and agentkit_site BROKEN" in proc.stdout
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
