"""tests/tasks/test_model_text.py on a real PostgreSQL (psycopg 3), which refuses NUL in text
and jsonb and lone surrogates everywhere: the same misbehaving model through the fake LLM server
and the real runner, in one `manage.py shell` process. Also a property-based test: arbitrary
text made storable is written to a text and a jsonb column of a real PostgreSQL table."""

from __future__ import annotations

import json
import textwrap

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from psycopg.types.json import Jsonb

from apps.engine.llm.text import storable
from tests.support import manage, server_env
from tests.tasks.model_text import (
    ANY_TEXT,
    CASES,
    ERROR_STORED,
    LONG_ANSWER,
    PRINTED_BAD,
    expected_result,
)

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, shutil, tempfile
    from pathlib import Path
    from django.conf import settings
    from apps.tasks.conf import reload_agent_config
    from apps.tasks.models import Task, TaskEvent
    from apps.tasks.run.runner import run_task
    from tests.fakes.llm_server import FakeLLMServer
    from tests.support import ROOT
    from tests.tasks.factories import make_task, make_user, make_workspace
    from tests.tasks import model_text as mt

    root = Path(tempfile.mkdtemp()) / "demo"
    shutil.copytree(ROOT / "demo" / "workspace", root)
    user = make_user("pg-text")
    workspace = make_workspace("pg-text", root, user)
    out = {}
    with FakeLLMServer() as server:
        path = root.parent / "agentkit.yaml"
        path.write_text(
            "models: {main: {provider: openai, model: fake, base_url: '%s'}}\\n"
            "llm: {retries: {max_attempts: 1}}\\n"
            "sandbox: {mode: 'off'}\\n"
            "limits: {answer_chars: 1000}\\n" % server.openai_base_url
        )
        settings.AGENTKIT_CONFIG = str(path)
        reload_agent_config()

        def run(name, script, faults):
            server.set_script(script)
            server.fail_next(*faults)
            task = make_task(user, workspace, goal=name)
            returned = asyncio.run(run_task(task.pk))
            task.refresh_from_db()
            events = list(TaskEvent.objects.filter(task=task).order_by("seq"))
            out[name] = {
                "returned": returned,
                "status": task.status,
                "result": task.result,
                "last_seq": task.last_seq,
                "seqs": [e.seq for e in events],
                "types": [e.type for e in events],
                "data": {e.type: e.data for e in events if e.type != "token"},
                "unstorable": mt.unstorable_in(
                    [[e.data for e in events], task.error, task.original_error]
                ),
                "original_error": task.original_error,
            }

        for kind, place in mt.CASES:
            run(f"{kind}-{place}", mt.case_script(kind, place), mt.case_faults(kind, place))
        run("tool-output", mt.TOOL_OUTPUT_SCRIPT, [])
        run("long", [mt.LONG_ANSWER], [])
        run("error-body", [mt.ANSWER], mt.error_faults())
    print("RESULT " + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def runs(migrated_postgres_url, tmp_path_factory) -> dict:
    env = server_env(tmp_path_factory.mktemp("pg-text"), DATABASE_URL=migrated_postgres_url)
    ran = manage(env, "shell", "-c", SCRIPT)
    assert ran.returncode == 0, ran.stderr[-3000:]
    line = next(x for x in ran.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def assert_ended(run: dict, status: str = "completed") -> None:
    assert run["returned"] == run["status"] == status
    assert (
        run["seqs"] == list(range(1, len(run["seqs"]) + 1)) == list(range(1, run["last_seq"] + 1))
    )
    assert run["types"].count("task_finished") == 1 and run["types"][-1] == "task_finished"
    assert run["unstorable"] == []


@pytest.mark.parametrize("case", CASES, ids=[f"{kind}-{place}" for kind, place in CASES])
def test_a_misbehaving_model_still_ends_its_task_on_postgres(runs, case):
    kind, place = case
    run = runs[f"{kind}-{place}"]
    assert_ended(run)
    assert run["result"] == expected_result(kind, place)


def test_tool_output_with_nul_and_bytes_that_are_not_utf8_is_stored_on_postgres(runs):
    run = runs["tool-output"]
    assert_ended(run)
    assert PRINTED_BAD in run["data"]["tool_result"]["output"]


def test_a_long_answer_is_stored_once_in_full_on_postgres(runs):
    run = runs["long"]
    assert_ended(run)
    assert run["result"] == LONG_ANSWER
    finished = run["data"]["task_finished"]
    assert finished["final_truncated"] is True and finished["final_chars"] == len(LONG_ANSWER)
    assert len(finished["final"]) < 1200 and "final_full" not in finished


@pytest.fixture(scope="module")
def pg_table(migrated_postgres_url):
    with psycopg.connect(migrated_postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS storable_text (body text, data jsonb)")
        yield conn


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=ANY_TEXT)
def test_any_text_made_storable_is_written_to_postgres_text_and_jsonb(pg_table, text):
    """What PostgreSQL refuses (NUL in text and jsonb, lone surrogates) never reaches it; what
    it reads back is what was written."""
    fixed = storable(text)
    row = pg_table.execute(
        "INSERT INTO storable_text VALUES (%s, %s) RETURNING body, data",
        [fixed, Jsonb({"text": fixed, fixed: 1})],
    ).fetchone()
    assert row == (fixed, {"text": fixed, fixed: 1})


def test_an_error_body_with_nul_and_a_lone_surrogate_still_ends_the_task_on_postgres(runs):
    run = runs["error-body"]
    assert_ended(run, "failed")
    assert ERROR_STORED in run["original_error"]
