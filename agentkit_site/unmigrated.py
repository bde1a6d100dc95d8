"""A command run before the database was set up says what to do instead of a traceback.

`manage.py run_tasks …` (or any command that reads a table) in a clone where `make run` has not
migrated yet, or after an update that brought new migrations, fails on a table or column the
database lacks: SQLite's `no such table: auth_user`, PostgreSQL's `relation "auth_user" does not
exist`. manage.py hands such a failure to `unmigrated_hint`, which names the missing table and
the database (its path or name, never its URL: that may hold a password) and says to migrate
first; any other failure is raised as it was.
"""

from __future__ import annotations

import re

_SQLITE = re.compile(r"^no such (table|column): (\S+)")
_POSTGRES = re.compile(r'^(relation|column) "?([^"\s]+)"? (of relation "[^"]+" )?does not exist')


def _missing(exc: BaseException) -> str | None:
    """'table X' / 'column X' when exc (or what caused it) is a database error of that kind."""
    from django.db import OperationalError, ProgrammingError

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OperationalError | ProgrammingError):
            text = str(exc).strip()
            found = _SQLITE.match(text) or _POSTGRES.match(text)
            if found:
                kind = "table" if found.group(1) in ("table", "relation") else "column"
                return f"{kind} {found.group(2)}"
        exc = exc.__cause__ or exc.__context__
    return None


def unmigrated_hint(exc: BaseException) -> str | None:
    """What to tell the person when exc means the database is not (fully) migrated, else None."""
    missing = _missing(exc)
    if missing is None:
        return None
    from django.conf import settings

    database = settings.DATABASES["default"]
    where = database.get("NAME", "")
    if database.get("ENGINE", "").endswith("sqlite3"):
        where = f"SQLite file {where}"
    else:
        where = f"database {where!r}"
    return (
        f"agentkit: the database ({where}) has not been migrated (missing {missing}). Run "
        "`make run` (it migrates, then starts the server) or `.venv/bin/python manage.py "
        "migrate` first, then this command again."
    )
