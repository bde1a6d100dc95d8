from __future__ import annotations

import itertools
import os
from pathlib import Path

import psycopg
import pytest

from tests.services import postgres_bin_dir, private_postgres, private_redis


@pytest.fixture(scope="session", autouse=True)
def quick_password_hashing():
    """Passwords made in this process (test users, logins) are hashed with a one-round hasher:
    the shipped PBKDF2 takes about half a second a password by design, and hundreds of tests make
    users. The shipped hashers stay in the list, so hashes made by the servers and commands the
    tests start (their own settings) still verify here. No test here is about hashing strength."""
    from django.conf import settings
    from django.test.utils import override_settings

    quick = "django.contrib.auth.hashers.MD5PasswordHasher"
    with override_settings(PASSWORD_HASHERS=[quick, *settings.PASSWORD_HASHERS]):
        yield


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> str:
    """A real Redis: the one `make test` started (AGENTKIT_TEST_REDIS_URL), else a private one."""
    url = os.environ.get("AGENTKIT_TEST_REDIS_URL")
    if url:
        yield url
        return
    with private_redis(Path(tmp_path_factory.mktemp("redis"))) as started:
        yield started


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory):
    """One throwaway PostgreSQL cluster for the session (initdb and start cost seconds each
    time); `postgres_url` gives every module a database of its own in it."""
    if postgres_bin_dir() is None:
        pytest.fail(
            "PostgreSQL server not installed (no initdb/pg_ctl on PATH or in "
            "/usr/lib/postgresql/*/bin): install it (Debian: apt-get install postgresql); "
            "make test does that when run as root"
        )
    with private_postgres(tmp_path_factory.mktemp("pg")) as url:
        yield url


_databases = itertools.count(1)


@pytest.fixture(scope="module")
def postgres_url(postgres_server):
    """A fresh, empty PostgreSQL database per test module (in the session's cluster)."""
    name = f"agentkit_m{next(_databases)}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield postgres_server.rsplit("/", 1)[0] + "/" + name
