"""PostgreSQL through DATABASE_URL (psycopg 3): a real throwaway cluster, real migrations."""

from __future__ import annotations

import pytest

from tests.support import manage, server_env

pytestmark = pytest.mark.slow


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
