"""PostgreSQL recall's tables (see ``_pg_recall``): their DDL, run by ``migrate`` on every
index start (idempotent), and the HNSW indexes, made once the first vectors fix the
dimension (``hnsw``)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ConfigError
from ..stores.statements import Q
from ._pg_terms import terms_column

Op = Generator[Q, Any, Any]

NO_PGVECTOR: Final = (
    "recall: this PostgreSQL server lacks the pgvector extension the recall index needs "
    "(https://github.com/pgvector/pgvector; then CREATE EXTENSION vector, or let convomem "
    "create it); or run without recall: convomem serve --no-recall "
    "(Settings(use_recall=False)), or give the index another database with --recall URL"
)


@dataclass(frozen=True, slots=True)
class Tables:
    """The qualified names of the recall tables in ``schema`` (a quoted identifier: the
    store database's ``schema``)."""

    schema: str
    items: str
    meta: str
    keys: str

    @classmethod
    def in_schema(cls, schema: str) -> Tables:
        return cls(
            schema,
            f"{schema}.convomem_recall_items",
            f"{schema}.convomem_recall_meta",
            f"{schema}.convomem_recall_keys",
        )


def migrate(t: Tables) -> Op:
    """Create the tables, their indexes and the erasure trigger (idempotent; one
    migration at a time: an advisory lock); ``ConfigError`` (``NO_PGVECTOR``) when the
    server has no pgvector."""
    s, items = t.schema, t.items
    yield Q.run("SELECT pg_advisory_xact_lock(hashtext('convomem_recall_migrate'))")
    found = yield Q.one(
        "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"
    )
    if not found[0]:
        raise ConfigError(NO_PGVECTOR)
    yield Q.run("CREATE EXTENSION IF NOT EXISTS vector")
    for sql in (
        f"""CREATE TABLE IF NOT EXISTS {items} (
            rid BIGSERIAL PRIMARY KEY,
            tenant TEXT NOT NULL,
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            seq BIGINT,
            kind TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            text TEXT NOT NULL,
            terms TEXT NOT NULL DEFAULT '',
            tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', terms)) STORED,
            vec VECTOR NOT NULL,
            UNIQUE (tenant, user_id, session_id, message_id)
        )""",
        f"CREATE INDEX IF NOT EXISTS convomem_recall_by_user ON {items} (tenant, user_id, rid)",
        "CREATE INDEX IF NOT EXISTS convomem_recall_by_seq "
        f"ON {items} (tenant, user_id, session_id, seq)",
        f"CREATE INDEX IF NOT EXISTS convomem_recall_by_session ON {items} (tenant, session_id)",
        f"CREATE INDEX IF NOT EXISTS convomem_recall_tsv ON {items} USING gin (tsv)",
        f"CREATE TABLE IF NOT EXISTS {t.meta} (key TEXT PRIMARY KEY, value TEXT)",
        f"""CREATE OR REPLACE FUNCTION {s}.convomem_recall_session_gone() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM {items} WHERE tenant = OLD.tenant AND session_id = OLD.session_id;
            RETURN NULL;
        END $$""",
        "CREATE OR REPLACE TRIGGER convomem_recall_session_gone AFTER DELETE ON "
        f"{s}.convomem_sessions FOR EACH ROW EXECUTE FUNCTION "
        f"{s}.convomem_recall_session_gone()",
        f"""CREATE TABLE IF NOT EXISTS {t.keys} (
            rid BIGINT NOT NULL REFERENCES {items} (rid) ON DELETE CASCADE,
            k INTEGER NOT NULL,
            tenant TEXT NOT NULL,
            user_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            vec VECTOR NOT NULL,
            PRIMARY KEY (rid, k)
        )""",
        "CREATE INDEX IF NOT EXISTS convomem_recall_keys_by_user "
        f"ON {t.keys} (tenant, user_id, rid)",
    ):
        yield Q.run(sql)
    yield from terms_column(t.items)
    row = yield Q.one(f"SELECT value FROM {t.meta} WHERE key = 'dim'")
    if row is not None:  # a store from before the keys table: index its keys too
        yield from hnsw(t, int(row[0]))


def hnsw(t: Tables, dim: int) -> Op:
    """The HNSW indexes (cosine) of the items' and the keys' vectors, once ``dim`` is known."""
    for name, table in (
        ("convomem_recall_hnsw", t.items),
        ("convomem_recall_keys_hnsw", t.keys),
    ):
        yield Q.run(
            f"CREATE INDEX IF NOT EXISTS {name} ON "
            f"{table} USING hnsw ((vec::vector({int(dim)})) vector_cosine_ops)"
        )
