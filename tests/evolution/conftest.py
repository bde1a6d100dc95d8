"""Fixtures of the evolution tests: the demo workspace and config (tests/tasks), queue
`evolution` on the real test Redis, and a real RQ worker that drains it."""

from __future__ import annotations

import json
import shutil

import django_rq
import django_rq.settings
import pytest
from rq import SimpleWorker

from apps.evolution.models import EvolutionCounter
from tests.config_text import without_spec_review
from tests.support import ROOT
from tests.tasks.conftest import config_file, demo  # noqa: F401  (fixtures used here)

GOAL = "fix the failing test in tests/test_slug.py"
GIVES_UP = ROOT / "apps" / "engine" / "llm" / "scripts" / "plan_exec_gives_up.yaml"
# The review gate (tests/specs) is off: these tests learn from what runs after it.
SHIPPED = without_spec_review((ROOT / "agentkit.yaml").read_text())


def shipped_with(**replacements: str) -> str:
    """The shipped agentkit.yaml with `old=new` text replacements (each must apply)."""
    text = SHIPPED
    for old, new in replacements.values():
        assert old in text, old
        text = text.replace(old, new)
    return text


def gives_up_config(extra: dict[str, tuple[str, str]] | None = None) -> str:
    return shipped_with(
        script=("    chunk_delay_ms: 25", f"    script: {json.dumps(str(GIVES_UP))}"),
        **(extra or {}),
    )


def restore_demo(root) -> None:
    """Put the demo workspace back as shipped (a run edits it)."""
    shutil.rmtree(root)
    shutil.copytree(ROOT / "demo" / "workspace", root)


@pytest.fixture
def evolution_queue(redis_url, monkeypatch):
    """Queue `evolution` on the test Redis, empty before and after the test."""
    monkeypatch.setitem(
        django_rq.settings.QUEUES, "evolution", {"URL": redis_url, "DEFAULT_TIMEOUT": 600}
    )
    queue = django_rq.get_queue("evolution")
    queue.empty()
    yield queue
    queue.empty()


def drain(queue) -> int:
    """A real RQ worker (SimpleWorker, in this process: it sees the test database) runs every
    job waiting on the queue; returns how many ran."""
    before = queue.count
    SimpleWorker([queue], connection=queue.connection).work(burst=True)
    failed = queue.failed_job_registry
    assert failed.count == 0, [queue.fetch_job(i).exc_info for i in failed.get_job_ids()]
    return before


def counter(name: str) -> int:
    row = EvolutionCounter.objects.filter(name=name).first()
    return row.value if row else 0


def run(task) -> str:
    """Run a task through the runner (as the inline executor does outside a server)."""
    import asyncio

    from apps.tasks.run.runner import run_task

    return asyncio.run(run_task(task.pk))
