"""Helpers shared by tests: free ports, `manage.py` runs, a migrated SQLite file, and a real
agentkit server (Daphne, with an RQ worker if asked). A private Redis or PostgreSQL is in
services.py, agentkit.yaml text tweaks in config_text.py, and killed or interrupted runs in
interrupted_runs.py."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
# A directory every process of one pytest run shares (tests/conftest.py makes it in the
# controlling process; xdist workers inherit it): set-ups done once per run live there.
RUN_DIR_ENV = "AGENTKIT_TEST_RUN_DIR"

VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, *, timeout: float = 30.0, process: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"process exited with {process.returncode} before port {port} opened"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {timeout} s")


def python_probe(code: str, env: dict[str, str]) -> str:
    """Run `code` in a fresh interpreter at the project's root with exactly `env`, as a new
    process (a command, a worker, Daphne) would start; its stdout. A failure shows its stderr."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@dataclass
class Server:
    url: str
    port: int
    env: dict[str, str]
    username: str
    password: str
    process: subprocess.Popen
    log_path: Path

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )


def server_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_SETTINGS_MODULE"}}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp / 'db.sqlite3'}",
        AGENTKIT_VAR_DIR=str(tmp / "var"),
        DJANGO_SUPERUSER_USERNAME="admin",
        DJANGO_SUPERUSER_PASSWORD="correct-horse-battery",
        PYTHONUNBUFFERED="1",
    )
    env.pop("REDIS_URL", None)
    env.update(extra)
    return env


def _migrate(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=180,
    )


def migrate_sqlite(env: dict[str, str]) -> None:
    """`manage.py migrate` on the SQLite file at env's DATABASE_URL. A new file is a copy of a
    database this test run migrated once, by a real `manage.py migrate` (the same migrations
    for every test; running them per test cost seconds each; the copy is shared by the run's
    xdist workers); an existing one is migrated by the command. Tests of migrate itself run the
    command."""
    url = env["DATABASE_URL"]
    assert url.startswith("sqlite:///"), f"migrate_sqlite needs a SQLite DATABASE_URL, got {url}"
    target = Path(url.removeprefix("sqlite:///"))
    if target.exists():
        _migrate(env)
        return
    template = _migrated_template(env)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, target)


def _migrated_template(env: dict[str, str]) -> Path:
    """The run's migrated SQLite file, made by the first process that needs it (under a lock in
    the run's shared directory; a private temporary one outside a pytest run)."""
    from tests.services import locked

    if RUN_DIR_ENV not in os.environ:
        os.environ[RUN_DIR_ENV] = tempfile.mkdtemp(prefix="agentkit-test-run-")
        atexit.register(shutil.rmtree, os.environ[RUN_DIR_ENV], True)
    where = Path(os.environ[RUN_DIR_ENV]) / "migrated"
    template = where / "db.sqlite3"
    where.mkdir(exist_ok=True)
    with locked(where / "lock"):
        if not template.exists():
            partial = where / "partial.sqlite3"
            _migrate(
                {**env, "DATABASE_URL": f"sqlite:///{partial}", "AGENTKIT_VAR_DIR": str(where)}
            )
            # the migrating process is gone: its WAL is checkpointed into the file
            assert not Path(f"{partial}-wal").exists()
            partial.rename(template)
    return template


@contextlib.contextmanager
def agentkit_server(
    tmp: Path, *, worker: bool = False, queues: tuple[str, ...] = ("agent",), **extra_env: str
) -> Iterator[Server]:
    """migrate (migrate_sqlite) + bootstrap into a private SQLite file, then Daphne on a free port; with
    `worker=True` also an RQ worker for `queues` (needs REDIS_URL in extra_env)."""
    env = server_env(tmp, **extra_env)
    migrate_sqlite(env)
    booted = manage(env, "bootstrap")
    assert booted.returncode == 0, booted.stdout + booted.stderr
    port = free_port()
    log_path = tmp / "daphne.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                str(VENV_BIN / "daphne"),
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "agentkit_site.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    worker_proc = None
    if worker:
        with open(tmp / "worker.log", "wb") as log:
            worker_proc = subprocess.Popen(
                [
                    sys.executable,
                    "manage.py",
                    "rqworker",
                    *queues,
                    "--worker-class",
                    "rq.worker.SimpleWorker",
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
    try:
        # a bound for a server that never comes, not a figure under test: generous, as a
        # machine running the suite's workers in parallel may be busy (Daphne imports ~2 s of
        # CPU at start)
        wait_for_port(port, timeout=120, process=proc)
        yield Server(
            f"http://127.0.0.1:{port}",
            port,
            env,
            env["DJANGO_SUPERUSER_USERNAME"],
            env["DJANGO_SUPERUSER_PASSWORD"],
            proc,
            log_path,
        )
    finally:
        for child in filter(None, (proc, worker_proc)):
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def http_get(url: str) -> httpx.Response:
    return httpx.get(url, timeout=10, follow_redirects=False)


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`python manage.py ARGS` in the checkout with `env` (e.g. server_env(...)), output captured."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
