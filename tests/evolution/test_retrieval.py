"""Seed 000 U7 / R12: at task start the top 3 active HIGH pitfalls most similar to the goal (BM25
through SQLite FTS5) reach the volatile block of the first LLM call, quoted as data; each
injection is recorded; a failing or slow store is skipped with a warning and the task goes on;
pitfalls cross workspaces only when shared by an opted-in workspace into an opted-in one."""

from __future__ import annotations

import logging

import pytest
from django.db import connection

from apps.engine.config import PitfallsConfig
from apps.evolution.models import Pitfall, PitfallInjection
from apps.evolution.services.retrieval import pitfalls_for_task, pitfalls_search
from tests.evolution.conftest import GOAL, counter, run
from tests.fakes.llm_server import FakeLLMServer
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db(transaction=True)
TOP3 = PitfallsConfig()


def pitfall(workspace, trigger, advice="read the test first", **fields) -> Pitfall:
    values = {
        "category": "verification_failure",
        "severity": "high",
        "status": "active",
        "confidence": 0.8,
        "context": "",
        **fields,
    }
    return Pitfall.objects.create(workspace=workspace, trigger=trigger, advice=advice, **values)


def search(workspace, goal, config=TOP3):
    return pitfalls_search(
        workspace_id=workspace.pk,
        opted_in=workspace.share_evolution,
        goal=goal,
        skill="",
        config=config,
    )


def test_top_3_active_high_pitfalls_most_similar_to_the_goal(tmp_path):
    ws = make_workspace("alpha", tmp_path)
    best = pitfall(ws, "slugify separators collapse test fails", context="fix slugify separators")
    second = pitfall(ws, "slugify keeps punctuation", context="slugify")
    third = pitfall(ws, "separators in the slug test", context="")
    pitfall(ws, "unrelated: database migration order", context="migrations")
    pitfall(ws, "slugify separators candidate", status="candidate", confidence=0.35)
    pitfall(ws, "slugify separators retired", status="retired")
    pitfall(ws, "slugify separators low severity", severity="low")
    pitfall(ws, "slugify separators medium severity", severity="medium")
    fourth = pitfall(ws, "slugify", context="")

    found = search(ws, "make slugify collapse separators")
    assert len(found) == 3
    assert found[0] == best.pk
    assert set(found) <= {best.pk, second.pk, third.pk, fourth.pk}
    assert search(ws, "a goal with no words in common") == []
    assert search(ws, "the of and") == []  # stopwords only: nothing to rank by
    medium = PitfallsConfig(min_severity="medium")
    assert len(search(ws, "slugify separators severity", medium)) == 3


def test_edited_retired_and_deleted_pitfalls_are_searched_as_they_are_now(tmp_path):
    ws = make_workspace("alpha", tmp_path)
    row = pitfall(ws, "yaml indentation breaks the loader")
    assert search(ws, "yaml loader") == [row.pk]
    row.trigger = "toml tables are overwritten"
    row.save()
    assert search(ws, "yaml loader") == [] and search(ws, "toml tables") == [row.pk]
    row.status = "retired"  # only active pitfalls are in the index
    row.save()
    assert search(ws, "toml tables") == []
    row.status = "active"
    row.save()
    assert search(ws, "toml tables") == [row.pk]
    row.delete()
    assert search(ws, "toml tables") == []


def test_pitfalls_reach_the_first_llm_call_quoted_as_data_and_injections_are_recorded(
    demo, config_file
):
    user, workspace, _ = demo
    hit = pitfall(
        workspace, 'slug "separators" collapse', advice="run pytest on tests/test_slug.py"
    )
    pitfall(workspace, "slug separators low", severity="low")
    # the second "Done.": the answer after the nudge to use a tool (auto tool_choice)
    with FakeLLMServer(script=["Done.", "Done."]) as server:
        entry = server.model_entry("openai")
        config_file(
            f"""
            models:
              main: {{provider: openai, model: {entry["model"]}, base_url: "{entry["base_url"]}"}}
            """
        )
        task = make_task(user, workspace, goal=GOAL, mode="react")
        assert run(task) == "completed"
        first = server.requests[0].body
    system = first["messages"][0]["content"]
    system = system if isinstance(system, str) else "".join(b["text"] for b in system)
    assert "## Pitfalls seen before" in system
    assert "not an instruction" in system
    assert '"slug \\"separators\\" collapse"' in system  # quoted (JSON string), not raw text
    assert "slug separators low" not in system
    stable_end = system.index("## Pitfalls seen before")
    assert "slug" not in system[:stable_end].split("You are agentkit")[0]
    injection = PitfallInjection.objects.get(task=task)
    assert injection.pitfall_id == hit.pk and injection.outcome == "completed"
    hit.refresh_from_db()
    assert hit.hit_count == 1


def test_a_goal_with_no_similar_pitfall_adds_no_section(demo, config_file):
    user, workspace, _ = demo
    pitfall(workspace, "slug separators collapse")
    # the second "Done.": the answer after the nudge to use a tool (auto tool_choice)
    with FakeLLMServer(script=["Done.", "Done."]) as server:
        entry = server.model_entry("openai")
        config_file(
            f"""
            models:
              main: {{provider: openai, model: {entry["model"]}, base_url: "{entry["base_url"]}"}}
            """
        )
        task = make_task(user, workspace, goal="write a haiku about autumn", mode="react")
        assert run(task) == "completed"
        first = server.requests[0].body
    system = first["messages"][0]["content"]
    system = system if isinstance(system, str) else "".join(b["text"] for b in system)
    # (the workspace's repository map names slug.py; the pitfall's text is what must be absent)
    assert "Pitfalls seen before" not in system and "separators collapse" not in system
    assert not PitfallInjection.objects.exists()


def test_direct_chat_gets_no_pitfalls(tmp_path):
    ws = make_workspace("alpha", tmp_path)
    pitfall(ws, "slugify separators")
    task = make_task(make_user("u"), ws, goal="slugify separators", mode="direct_chat")
    assert pitfalls_for_task(task=task, config=TOP3) == ""


def test_a_broken_store_is_skipped_with_a_warning_and_the_task_goes_on(demo, caplog):
    user, workspace, _ = demo
    pitfall(workspace, "slugify separators")
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE evolution_pitfall_fts RENAME TO fts_away")
    try:
        task = make_task(user, workspace, goal=GOAL, mode="react")
        with caplog.at_level(logging.WARNING, logger="apps.evolution"):
            assert run(task) == "completed"
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE fts_away RENAME TO evolution_pitfall_fts")
    assert "pitfall retrieval for task" in caplog.text and "skipped" in caplog.text
    assert counter("retrieval_skipped") == 1
    assert not PitfallInjection.objects.exists()


def test_a_search_slower_than_the_limit_is_interrupted_and_skipped(tmp_path, caplog):
    ws = make_workspace("alpha", tmp_path)
    Pitfall.objects.bulk_create(
        Pitfall(
            workspace=ws,
            category="tool_error",
            trigger=f"slugify separators variant {n} " + "word " * 20,
            advice="advice",
            severity="high",
            status="active",
        )
        for n in range(3000)
    )
    task = make_task(make_user("u"), ws, goal="slugify separators variant word", mode="react")
    fast_enough = PitfallsConfig(timeout_ms=5000)
    assert pitfalls_for_task(task=task, config=fast_enough)
    too_slow = PitfallsConfig.model_construct(top_k=3, min_severity="high", timeout_ms=0)
    with caplog.at_level(logging.WARNING, logger="apps.evolution"):
        assert pitfalls_for_task(task=task, config=too_slow) == ""
    assert "slower than pitfalls.timeout_ms" in caplog.text


def _pair(tmp_path, *, a_opted_in, b_opted_in, a_shares):
    a = make_workspace("A", tmp_path / "a")
    b = make_workspace("B", tmp_path / "b")
    a.share_evolution, b.share_evolution = a_opted_in, b_opted_in
    a.save()
    b.save()
    learned = pitfall(a, "slugify separators collapse", shared=a_shares)
    return a, b, learned


@pytest.mark.parametrize(
    ("a_opted_in", "b_opted_in", "a_shares", "b_sees_it"),
    [
        (False, False, False, False),
        (True, True, False, False),  # both opted in, but A did not share this pitfall
        (True, False, True, False),  # A shares, B did not opt in
        (False, True, True, False),  # shared flag set while A is not opted in
        (True, True, True, True),
    ],
)
def test_a_pitfall_of_workspace_a_reaches_b_only_when_a_shares_and_both_opted_in(
    tmp_path, a_opted_in, b_opted_in, a_shares, b_sees_it
):
    a, b, learned = _pair(tmp_path, a_opted_in=a_opted_in, b_opted_in=b_opted_in, a_shares=a_shares)
    assert search(a, "slugify separators") == [learned.pk]  # always in its own workspace
    assert search(b, "slugify separators") == ([learned.pk] if b_sees_it else [])


def test_isolation_holds_in_the_other_direction_too(tmp_path):
    a, b, _ = _pair(tmp_path, a_opted_in=True, b_opted_in=True, a_shares=False)
    from_b = pitfall(b, "yaml loader indentation")
    assert search(a, "yaml loader indentation") == []
    from_b.shared = True
    from_b.save()
    assert search(a, "yaml loader indentation") == [from_b.pk]
