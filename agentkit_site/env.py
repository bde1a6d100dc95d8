"""Small, dependency-free readers for settings that come from the environment."""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use 1/0, true/false, yes/no")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def secret_key(key_file: Path) -> str:
    """SECRET_KEY from the environment, else generated once and kept in an untracked file."""
    from_env = os.environ.get("SECRET_KEY")
    if from_env:
        return from_env
    if key_file.exists():
        return key_file.read_text().strip()
    key_file.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


def database_from_url(url: str, base_dir: Path) -> dict:
    """Django DATABASES['default'] from a URL: sqlite:///relative.db, sqlite:////abs.db,
    postgres://user:pass@host:port/name?sslmode=require (postgresql:// works too)."""
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    if scheme == "sqlite":
        # sqlite:///var/db.sqlite3 -> relative to the project; sqlite:////tmp/x.db -> absolute
        raw_path = unquote(parsed.path)
        if raw_path.startswith("//"):
            path = Path(raw_path[1:])
        else:
            path = (
                base_dir / raw_path.lstrip("/")
                if raw_path.strip("/")
                else base_dir / "var/db.sqlite3"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(path),
            "OPTIONS": {
                # WAL lets the web process read while a runner writes events.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
            # Per process, in the temp dir: two test runs at once never share a file.
            "TEST": {
                "NAME": os.path.join(tempfile.gettempdir(), f"agentkit-test-{os.getpid()}.sqlite3")
            },
        }
    if scheme in {"postgres", "postgresql", "pgsql"}:
        options = dict(parse_qsl(parsed.query))
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")),
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "OPTIONS": options,
            # Kept open for a minute, checked before reuse: a connection the server closed
            # (a restart, a failover) is replaced instead of failing the next query. Threads
            # outside requests recycle theirs the same way (apps/tasks/run/db_threads.py).
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL scheme {scheme!r} is not supported: use sqlite:///path.db or "
        "postgres://user:password@host:5432/dbname"
    )
