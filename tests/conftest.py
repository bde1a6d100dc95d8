"""Fixtures every test directory may use: quick password hashing, a real Redis (`redis_url`) and
PostgreSQL (`postgres_server`, `postgres_url`).

The suite runs in parallel processes (pytest-xdist, `-n N`; `make test` does): each worker has
its own Django test database (pytest-django) and its own Redis, and all of them share one
PostgreSQL cluster, in which every test module gets a database of its own. The controlling
process (the only one without xdist) makes a directory the run's processes share
(AGENTKIT_TEST_RUN_DIR): the cluster's record and the once-migrated SQLite template live there,
and it stops the cluster and removes the directory at the end."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.services import (
    create_database,
    postgres_bin_dir,
    private_redis,
    shared_postgres,
    stop_shared_postgres,
)
from tests.support import RUN_DIR_ENV

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


def pytest_configure(config):
    if "PYTEST_XDIST_WORKER" in os.environ:
        return  # a worker: it inherited the controller's AGENTKIT_TEST_RUN_DIR
    run_dir = tempfile.mkdtemp(prefix="agentkit-test-run-")
    os.environ[RUN_DIR_ENV] = run_dir
    config.agentkit_run_dir = run_dir


def pytest_collection_modifyitems(session, config, items):
    """Modules with a test marked `slow` run first (in their order; the rest after, in theirs):
    with the suite spread over xdist workers, a minute-long test that starts last would leave
    the other workers idle while it runs."""

    def module(item):
        return getattr(item, "module", None)

    slow = {module(item) for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: module(item) not in slow)


def pytest_unconfigure(config):
    # This process's test databases (agentkit_site/env.py names them by pid; xdist adds _gwN):
    # Django deletes the file, but a connection still open then (a thread's) leaves -wal/-shm.
    for left in Path(tempfile.gettempdir()).glob(f"agentkit-test-{os.getpid()}.sqlite3*"):
        left.unlink(missing_ok=True)
    run_dir = getattr(config, "agentkit_run_dir", None)
    if run_dir is None:
        return
    stop_shared_postgres(Path(run_dir))
    shutil.rmtree(run_dir, ignore_errors=True)
    if os.environ.get(RUN_DIR_ENV) == run_dir:
        del os.environ[RUN_DIR_ENV]


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
    """A real Redis: the one `make test` started (AGENTKIT_TEST_REDIS_URL), else a private one.
    Under pytest-xdist only the first worker (gw0) uses make test's; every other worker starts
    a private one: the channel layer is Redis Pub/Sub, whose channels are server-wide (not per
    database number), and each worker's task ids start at 1, so workers sharing a server would
    hear each other's `task.1` events."""
    url = os.environ.get("AGENTKIT_TEST_REDIS_URL")
    if url and WORKER in ("main", "gw0"):
        yield url
        return
    with private_redis(Path(tmp_path_factory.mktemp("redis"))) as started:
        yield started


@pytest.fixture(scope="session")
def postgres_server():
    """The run's one throwaway PostgreSQL cluster (initdb and start cost seconds each time),
    shared by every xdist worker; `postgres_url` gives every module a database of its own in it."""
    if postgres_bin_dir() is None:
        pytest.fail(
            "PostgreSQL server not installed (no initdb/pg_ctl on PATH or in "
            "/usr/lib/postgresql/*/bin): install it (Debian: apt-get install postgresql); "
            "make test does that when run as root"
        )
    return shared_postgres(Path(os.environ[RUN_DIR_ENV]))


_databases = itertools.count(1)


@pytest.fixture(scope="module")
def postgres_url(postgres_server):
    """A fresh, empty PostgreSQL database per test module (in the run's cluster)."""
    run_dir = Path(os.environ[RUN_DIR_ENV])
    return create_database(run_dir, postgres_server, f"agentkit_{WORKER}_m{next(_databases)}")


@pytest.fixture(scope="module")
def migrated_postgres_url(postgres_server):
    """As postgres_url, with agentkit's migrations applied: a copy of a database that a real
    `manage.py migrate` migrated once for the run (each migrate on PostgreSQL costs seconds).
    Tests of migrate itself take postgres_url and run the command."""
    run_dir = Path(os.environ[RUN_DIR_ENV])
    name = f"agentkit_{WORKER}_m{next(_databases)}"
    return create_database(run_dir, postgres_server, name, migrated=True)
