from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from agentkit_site.env import database_from_url, env_bool, secret_key
from tests.support import ROOT


def test_sqlite_url_relative_to_project_uses_wal(tmp_path):
    db = database_from_url("sqlite:///var/x.sqlite3", tmp_path)
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["NAME"] == str(tmp_path / "var" / "x.sqlite3")
    assert "journal_mode=WAL" in db["OPTIONS"]["init_command"]


def test_sqlite_url_absolute(tmp_path):
    db = database_from_url(f"sqlite:///{tmp_path}/abs.db", tmp_path / "elsewhere")
    assert db["NAME"] == f"{tmp_path}/abs.db"


def test_postgres_url_with_escaped_password_and_options(tmp_path):
    db = database_from_url(
        "postgres://agent:p%40ss@db.local:6543/agentkit?sslmode=require", tmp_path
    )
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "agent",
        "p@ss",
        "db.local",
        "6543",
        "agentkit",
    )
    assert db["OPTIONS"] == {"sslmode": "require"}


def test_unsupported_database_scheme_says_what_works(tmp_path):
    with pytest.raises(ImproperlyConfigured, match=r"sqlite:///path\.db or postgres://"):
        database_from_url("mysql://x@y/z", tmp_path)


def test_bad_boolean_is_refused(monkeypatch):
    monkeypatch.setenv("DEBUG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="DEBUG='maybe'"):
        env_bool("DEBUG", False)


def test_secret_key_is_generated_once_and_kept_private(tmp_path, monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    key_file = tmp_path / ".secret_key"
    first = secret_key(key_file)
    assert len(first) >= 50
    assert secret_key(key_file) == first
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    monkeypatch.setenv("SECRET_KEY", "from-env")
    assert secret_key(key_file) == "from-env"


def test_secret_key_file_is_ignored_by_git():
    proc = subprocess.run(["git", "check-ignore", "-q", ".secret_key"], cwd=ROOT)
    assert proc.returncode == 0


def test_sqlite_database_really_runs_in_wal_mode(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path}/wal.db"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    code = (
        "import django; django.setup(); from django.db import connection; "
        "c = connection.cursor(); c.execute('PRAGMA journal_mode'); print(c.fetchone()[0])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "DJANGO_SETTINGS_MODULE": "agentkit_site.settings"},
    )
    assert proc.stdout.strip() == "wal", proc.stderr
