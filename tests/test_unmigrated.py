"""A command run before `make run` migrated the database says what to do (agentkit_site/
unmigrated.py via manage.py), instead of a `no such table` traceback: real `manage.py`
subprocesses on a fresh SQLite file and on a fresh PostgreSQL database; after `migrate` the same
command gets past it."""

from __future__ import annotations

import pytest

from tests.support import manage, server_env

pytestmark = pytest.mark.slow  # spawns processes: started early (tests/conftest.py)

COMMANDS = [
    ("run_tasks", "examples/suite.yaml"),
    ("resume_task", "1"),
    ("create_api_token", "admin"),
]


def says_migrate_first(result, missing: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output and "OperationalError" not in output, output
    assert f"has not been migrated (missing table {missing})" in result.stderr
    assert "Run `make run`" in result.stderr
    assert "`.venv/bin/python manage.py migrate` first" in result.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_command_on_an_unmigrated_sqlite_file_says_to_migrate_first(tmp_path, command):
    env = server_env(tmp_path)
    result = manage(env, *command)
    says_migrate_first(result, "auth_user" if command[0] != "resume_task" else "tasks_task")
    assert f"SQLite file {tmp_path / 'db.sqlite3'}" in result.stderr


def test_after_migrate_the_same_command_gets_past_it(tmp_path):
    env = server_env(tmp_path)
    assert manage(env, "migrate", "--noinput", "-v", "0").returncode == 0
    result = manage(env, "resume_task", "1")
    assert "has not been migrated" not in result.stderr
    assert "task 1" in (result.stdout + result.stderr).lower(), result.stdout + result.stderr


def test_other_database_failures_keep_their_traceback(tmp_path):
    (tmp_path / "a-directory").mkdir()  # no database file can be opened there
    env = server_env(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'a-directory'}")
    result = manage(env, "resume_task", "1")
    assert result.returncode != 0
    assert "has not been migrated" not in result.stderr
    assert "Traceback" in result.stderr and "unable to open database file" in result.stderr


def test_an_unmigrated_postgresql_database_gets_the_same_advice(tmp_path, postgres_url):
    env = server_env(tmp_path, DATABASE_URL=postgres_url)
    result = manage(env, "run_tasks", "examples/suite.yaml")
    says_migrate_first(result, "auth_user")
    name = postgres_url.rsplit("/", 1)[1]
    assert f"database '{name}'" in result.stderr
    assert "postgres://" not in result.stderr  # never the URL (it may hold a password)
