"""Full-text search over pitfalls for retrieval at planning: an FTS5 table kept in step by
triggers on SQLite (BM25 ranking), an expression GIN index on PostgreSQL."""

from django.db import migrations

SQLITE_FORWARD = [
    """CREATE VIRTUAL TABLE evolution_pitfall_fts USING fts5(
        "trigger", advice, context, content='evolution_pitfall', content_rowid='id')""",
    """CREATE TRIGGER evolution_pitfall_fts_insert AFTER INSERT ON evolution_pitfall BEGIN
        INSERT INTO evolution_pitfall_fts(rowid, "trigger", advice, context)
        VALUES (new.id, new."trigger", new.advice, new.context); END""",
    """CREATE TRIGGER evolution_pitfall_fts_delete AFTER DELETE ON evolution_pitfall BEGIN
        INSERT INTO evolution_pitfall_fts(evolution_pitfall_fts, rowid, "trigger", advice, context)
        VALUES ('delete', old.id, old."trigger", old.advice, old.context); END""",
    """CREATE TRIGGER evolution_pitfall_fts_update
        AFTER UPDATE OF "trigger", advice, context ON evolution_pitfall BEGIN
        INSERT INTO evolution_pitfall_fts(evolution_pitfall_fts, rowid, "trigger", advice, context)
        VALUES ('delete', old.id, old."trigger", old.advice, old.context);
        INSERT INTO evolution_pitfall_fts(rowid, "trigger", advice, context)
        VALUES (new.id, new."trigger", new.advice, new.context); END""",
    """INSERT INTO evolution_pitfall_fts(evolution_pitfall_fts) VALUES ('rebuild')""",
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
