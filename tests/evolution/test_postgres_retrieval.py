"""Retrieval on PostgreSQL (full-text search, ts_rank_cd over the GIN expression index of
migration 0002): the same ranking, gates and workspace isolation as on SQLite, on a real
throwaway cluster."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.support import manage, server_env

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import json
    from django.db import connection
    from apps.engine.config import PitfallsConfig
    from apps.evolution.models import Pitfall
    from apps.evolution.services.retrieval import pitfalls_search
    from apps.tasks.models import Workspace

    a = Workspace.objects.create(name="A", root_dir="/tmp/a", share_evolution=True)
    b = Workspace.objects.create(name="B", root_dir="/tmp/b", share_evolution=True)
    c = Workspace.objects.create(name="C", root_dir="/tmp/c", share_evolution=False)
    def make(ws, trigger, **kw):
        values = dict(category="verification_failure", severity="high", status="active",
                      advice="read the test first", context="")
        values.update(kw)
        return Pitfall.objects.create(workspace=ws, trigger=trigger, **values).pk
    ids = {
        "best": make(a, "slugify separators collapse test fails", context="fix slugify separators"),
        "second": make(a, "slugify keeps punctuation"),
        "other": make(a, "database migration order"),
        "candidate": make(a, "slugify separators candidate", status="candidate"),
        "low": make(a, "slugify separators low", severity="low"),
        "shared": make(b, "slugify separators shared by B", shared=True),
        "private_b": make(b, "slugify separators private to B"),
    }
    cfg = PitfallsConfig()
    def search(ws, goal):
        return pitfalls_search(workspace_id=ws.pk, opted_in=ws.share_evolution, goal=goal,
                               skill="", config=cfg)
    print(json.dumps({
        "vendor": connection.vendor,
        "ids": ids,
        "a": search(a, "make slugify collapse separators"),
        "c": search(c, "slugify separators"),
        "none": search(a, "completely unrelated words"),
        "index": [row[0] for row in connection.cursor().execute(
            "SELECT indexname FROM pg_indexes WHERE indexname = 'evolution_pitfall_fts'"
        ).fetchall()],
    }))
    """
)


def test_retrieval_on_postgres_ranks_gates_and_isolates(migrated_postgres_url, tmp_path):
    env = server_env(tmp_path, DATABASE_URL=migrated_postgres_url)
    ran = manage(env, "shell", "-c", SCRIPT)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout.strip().splitlines()[-1])
    ids = result["ids"]
    assert result["vendor"] == "postgresql" and result["index"] == ["evolution_pitfall_fts"]
    assert result["a"][0] == ids["best"]
    assert set(result["a"]) == {ids["best"], ids["second"], ids["shared"]}
    assert result["c"] == []  # C did not opt in: nothing of A or B
    assert result["none"] == []
