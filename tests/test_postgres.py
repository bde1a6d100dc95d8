"""PostgreSQL through DATABASE_URL (psycopg 3): a real throwaway cluster, real migrations."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import ROOT, postgres_bin_dir, private_postgres, server_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def postgres_url(tmp_path_factory):
    if postgres_bin_dir() is None:
        pytest.fail(
            "PostgreSQL server not installed (no initdb/pg_ctl on PATH or in "
            "/usr/lib/postgresql/*/bin): install it (Debian: apt-get install postgresql); "
            "make test does that when run as root"
        )
    with private_postgres(tmp_path_factory.mktemp("pg")) as url:
        yield url


def manage(env, *args):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_migrate_and_bootstrap_on_postgres(postgres_url, tmp_path):
    env = server_env(tmp_path, DATABASE_URL=postgres_url)
    migrated = manage(env, "migrate", "--noinput", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    first = manage(env, "bootstrap")
    assert first.returncode == 0, first.stderr
    again = manage(env, "bootstrap")
    assert again.returncode == 0 and "Found workspace 'demo'" in again.stdout
    query = manage(
        env,
        "shell",
        "-c",
        "from django.db import connection; from apps.tasks.models import Workspace; "
        "print(connection.vendor, Workspace.objects.get(name='demo').members.count())",
    )
    assert query.stdout.strip().splitlines()[-1].split() == ["postgresql", "1"], query.stderr
