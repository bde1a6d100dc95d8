from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import postgres_bin_dir, private_postgres, private_redis


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> str:
    """A real Redis: the one `make test` started (AGENTKIT_TEST_REDIS_URL), else a private one."""
    url = os.environ.get("AGENTKIT_TEST_REDIS_URL")
    if url:
        yield url
        return
    with private_redis(Path(tmp_path_factory.mktemp("redis"))) as started:
        yield started


@pytest.fixture(scope="module")
def postgres_url(tmp_path_factory):
    """A throwaway PostgreSQL cluster per test module; a missing server fails with advice."""
    if postgres_bin_dir() is None:
        pytest.fail(
            "PostgreSQL server not installed (no initdb/pg_ctl on PATH or in "
            "/usr/lib/postgresql/*/bin): install it (Debian: apt-get install postgresql); "
            "make test does that when run as root"
        )
    with private_postgres(tmp_path_factory.mktemp("pg")) as url:
        yield url
