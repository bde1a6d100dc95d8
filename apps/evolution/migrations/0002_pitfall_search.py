"""Full-text search over pitfalls for retrieval at planning: an FTS5 table of the active
pitfalls kept in step by triggers on SQLite (BM25 ranking), an expression GIN index on
PostgreSQL."""

from django.db import migrations

# Only active pitfalls are indexed (nothing else is ever retrieved): candidates, often the bulk,
# cost retrieval nothing. A status change moves a row in or out of the index.
_COLUMNS = '"trigger", advice, context'
_ADD = f"""INSERT INTO evolution_pitfall_fts(rowid, {_COLUMNS})
        VALUES (new.id, new."trigger", new.advice, new.context);"""
_REMOVE = f"""INSERT INTO evolution_pitfall_fts(evolution_pitfall_fts, rowid, {_COLUMNS})
        VALUES ('delete', old.id, old."trigger", old.advice, old.context);"""
SQLITE_FORWARD = [
    f"""CREATE VIRTUAL TABLE evolution_pitfall_fts USING fts5(
        {_COLUMNS}, content='evolution_pitfall', content_rowid='id')""",
    f"""CREATE TRIGGER evolution_pitfall_fts_insert AFTER INSERT ON evolution_pitfall
        WHEN new.status = 'active' BEGIN {_ADD} END""",
    f"""CREATE TRIGGER evolution_pitfall_fts_delete AFTER DELETE ON evolution_pitfall
        WHEN old.status = 'active' BEGIN {_REMOVE} END""",
    # one trigger, so the old row leaves the index before the new one enters
    f"""CREATE TRIGGER evolution_pitfall_fts_update
        AFTER UPDATE OF "trigger", advice, context, status ON evolution_pitfall BEGIN
        INSERT INTO evolution_pitfall_fts(evolution_pitfall_fts, rowid, {_COLUMNS})
        SELECT 'delete', old.id, old."trigger", old.advice, old.context
        WHERE old.status = 'active';
        INSERT INTO evolution_pitfall_fts(rowid, {_COLUMNS})
        SELECT new.id, new."trigger", new.advice, new.context WHERE new.status = 'active';
        END""",
    f"""INSERT INTO evolution_pitfall_fts(rowid, {_COLUMNS})
        SELECT id, "trigger", advice, context FROM evolution_pitfall WHERE status = 'active'""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS evolution_pitfall_fts_update",
    "DROP TRIGGER IF EXISTS evolution_pitfall_fts_delete",
    "DROP TRIGGER IF EXISTS evolution_pitfall_fts_insert",
    "DROP TABLE IF EXISTS evolution_pitfall_fts",
]
POSTGRES_FORWARD = [
    """CREATE INDEX evolution_pitfall_fts ON evolution_pitfall USING gin (
        to_tsvector('english', "trigger" || ' ' || advice || ' ' || context))"""
]
POSTGRES_BACKWARD = ["DROP INDEX IF EXISTS evolution_pitfall_fts"]


def _run(statements):
    def run(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        for sql in statements.get(vendor, ()):
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("evolution", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        )
    ]
