"""The scale-out recall backend: PostgreSQL + pgvector, in the store's schema.

- ``convomem_recall_items``: one row per item, scoped by ``(tenant, user_id)``, with a
  generated ``tsvector`` (the ``simple`` configuration: no stemming, any language; a GIN
  index) and a ``vector`` column; an HNSW index (cosine) over it is made when the first
  vectors fix the dimension (kept in ``convomem_recall_meta``).
- Lexical relevance is ``ts_rank_cd`` over the user's newest ``LEXICAL_WINDOW`` matches;
  vector search uses the HNSW index with
  ``hnsw.iterative_scan = relaxed_order`` (pgvector >= 0.8), so a filtered search still
  finds k items of the user; older pgvector gets an exact search over the user's rows.
- A trigger deletes a session's items when the store deletes the session.

Operations are generators of statements (``Q``) run by the store's sync or async driver.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from ..errors import ConfigError
from ._backend import Item, Q, Row, Scope
from .fusion import VECTOR_TOLERANCE

Op = Generator[Q, Any, Any]

_COLUMNS = "rid, session_id, message_id, seq, kind, created_at, text"
LEXICAL_WINDOW = 2000
"""Matches ranked by ``ts_rank_cd`` at most: the user's newest (ranking every row a
common word matches made one-user searches slow)."""


def _literal(vec: Any) -> str:
    return "[" + ",".join(map(repr, vec.tolist())) + "]"


def _tail(np: Any, it: Item) -> tuple[float, str, str]:
    return it.created_at, it.text, _literal(np.frombuffer(it.vec, dtype=np.float32))


class PgRecall:
    """The PostgreSQL dialect of the recall operations."""

    name = "postgresql"

    def __init__(self, np: Any, schema: str) -> None:
        self.np = np
        self.schema = schema
        self.items = f"{schema}.convomem_recall_items"
        self.meta = f"{schema}.convomem_recall_meta"
        self.dim: int | None = None
        self.iterative: bool | None = None

    def migrate(self) -> Op:
        s, items = self.schema, self.items
        yield Q.run("SELECT pg_advisory_xact_lock(hashtext('convomem_recall_migrate'))")
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
                tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
                vec VECTOR NOT NULL,
                UNIQUE (tenant, user_id, session_id, message_id)
            )""",
            f"CREATE INDEX IF NOT EXISTS convomem_recall_by_user ON {items} (tenant, user_id, rid)",
            "CREATE INDEX IF NOT EXISTS convomem_recall_by_seq "
            f"ON {items} (tenant, user_id, session_id, seq)",
            "CREATE INDEX IF NOT EXISTS convomem_recall_by_session "
            f"ON {items} (tenant, session_id)",
            f"CREATE INDEX IF NOT EXISTS convomem_recall_tsv ON {items} USING gin (tsv)",
            f"CREATE TABLE IF NOT EXISTS {self.meta} (key TEXT PRIMARY KEY, value TEXT)",
            f"""CREATE OR REPLACE FUNCTION {s}.convomem_recall_session_gone() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                DELETE FROM {items} WHERE tenant = OLD.tenant AND session_id = OLD.session_id;
                RETURN NULL;
            END $$""",
            "CREATE OR REPLACE TRIGGER convomem_recall_session_gone AFTER DELETE ON "
            f"{s}.convomem_sessions FOR EACH ROW EXECUTE FUNCTION "
            f"{s}.convomem_recall_session_gone()",
        ):
            yield Q.run(sql)

    def _version(self) -> Op:
        if self.iterative is None:
            row = yield Q.one("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            parts = tuple(int(p) for p in str(row[0]).split(".")[:2] if p.isdigit())
            self.iterative = parts >= (0, 8)
        return self.iterative

    def _dim(self, given: int | None) -> Op:
        if self.dim is None:
            row = yield Q.one(f"SELECT value FROM {self.meta} WHERE key = 'dim'")
            if row is not None:
                self.dim = int(row[0])
            elif given is not None:
                yield Q.run(
                    f"INSERT INTO {self.meta} VALUES ('dim', %s) ON CONFLICT DO NOTHING",
                    (str(given),),
                )
                yield Q.run(
                    "CREATE INDEX IF NOT EXISTS convomem_recall_hnsw ON "
                    f"{self.items} USING hnsw ((vec::vector({int(given)})) vector_cosine_ops)"
                )
                self.dim = given
        if given is not None and self.dim != given:
            raise ConfigError(
                f"embedder: gives vectors of {given} numbers, but this recall index holds "
                f"vectors of {self.dim}; use the embedder it was built with"
            )
        return self.dim

    def known(self, scope: Scope, session_id: str, ids: Sequence[str]) -> Op:
        rows = yield Q.all(
            f"SELECT message_id, text FROM {self.items} WHERE tenant = %s AND user_id = %s "
            "AND session_id = %s AND message_id = ANY(%s)",
            (*scope, session_id, list(ids)),
        )
        return dict(rows)

    def insert(self, scope: Scope, items: Sequence[Item], dim: int) -> Op:
        np = self.np
        yield from self._dim(dim)
        total = 0
        for i in range(0, len(items), 500):
            chunk = items[i : i + 500]
            rows = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s::vector)"] * len(chunk))
            params = [
                v
                for it in chunk
                for v in (*scope, it.session_id, it.message_id, it.seq, it.kind, *_tail(np, it))
            ]
            total += yield Q.run(
                f"INSERT INTO {self.items} (tenant, user_id, session_id, message_id, seq, kind, "
                f"created_at, text, vec) VALUES {rows} "
                "ON CONFLICT (tenant, user_id, session_id, message_id) DO NOTHING",
                params,
            )
        return total

    def _filters(self, kinds: Sequence[str] | None, as_of: float | None) -> tuple[str, list[Any]]:
        sql, params = "", list[Any]()
        if kinds is not None:
            sql += " AND kind = ANY(%s)"
            params.append(list(kinds))
        if as_of is not None:
            sql += " AND created_at <= %s"
            params.append(as_of)
        return sql, params

    def lexical(
        self,
        scope: Scope,
        terms: Sequence[str],
        n: int,
        kinds: Sequence[str] | None,
        as_of: float | None,
    ) -> Op:
        if not terms:
            return []
        query = " | ".join(f"'{t}'" for t in terms)  # terms are letters and digits only
        extra, params = self._filters(kinds, as_of)
        rows = yield Q.all(
            "WITH q AS (SELECT to_tsquery('simple', %s) AS q), "
            f"m AS (SELECT rid, tsv FROM {self.items}, q "
            f"WHERE tenant = %s AND user_id = %s AND tsv @@ q.q{extra} "
            f"ORDER BY rid DESC LIMIT {LEXICAL_WINDOW}) "
            "SELECT m.rid, ts_rank_cd(m.tsv, q.q) AS s FROM m, q "
            "ORDER BY s DESC, m.rid DESC LIMIT %s",
            (query, *scope, *params, n),
        )
        return [(int(rid), float(s)) for rid, s in rows]

    def vector(
        self,
        scope: Scope,
        query: Any,
        n: int,
        kinds: Sequence[str] | None,
        as_of: float | None,
    ) -> Op:
        dim = yield from self._dim(None)
        if dim is None or query.shape[0] != dim:
            return []
        iterative = yield from self._version()
        extra, params = self._filters(kinds, as_of)
        lit = _literal(query)
        dist = f"(vec::vector({dim})) <=> %s::vector({dim})"
        if iterative:
            yield Q.run(
                "BEGIN; SET LOCAL hnsw.iterative_scan = relaxed_order; "
                f"SET LOCAL hnsw.ef_search = {min(1000, max(40, n))}"
            )
            rows = yield Q.all(
                f"SELECT rid, 1 - ({dist}) FROM {self.items} "
                f"WHERE tenant = %s AND user_id = %s{extra} ORDER BY {dist} LIMIT %s",
                (lit, *scope, *params, lit, n),
            )
            yield Q.run("COMMIT")
        else:
            rows = yield Q.all(
                f"WITH mine AS MATERIALIZED (SELECT rid, vec FROM {self.items} "
                f"WHERE tenant = %s AND user_id = %s{extra}) "
                f"SELECT rid, 1 - ({dist}) FROM mine ORDER BY {dist} LIMIT %s",
                (*scope, *params, lit, lit, n),
            )
        found = sorted(((int(r), float(c)) for r, c in rows), key=lambda rc: -rc[1])
        return [(r, c) for r, c in found if c > VECTOR_TOLERANCE]

    def rows(self, scope: Scope, rids: Sequence[int]) -> Op:
        found = yield Q.all(
            f"SELECT {_COLUMNS} FROM {self.items} WHERE tenant = %s AND user_id = %s "
            "AND rid = ANY(%s)",
            (*scope, list(rids)),
        )
        return {int(r[0]): Row(int(r[0]), *r[1:]) for r in found}

    def near(self, scope: Scope, around: Sequence[tuple[str, int]], width: int) -> Op:
        """The items of the scope within ``width`` seqs of each ``(session_id, seq)``."""
        found = yield Q.all(
            f"SELECT DISTINCT {', '.join('i.' + c for c in _COLUMNS.split(', '))} "
            f"FROM {self.items} i JOIN unnest(%s::text[], %s::bigint[]) AS w(sid, s) "
            "ON i.session_id = w.sid AND i.seq BETWEEN w.s - %s AND w.s + %s "
            "WHERE i.tenant = %s AND i.user_id = %s",
            ([a[0] for a in around], [a[1] for a in around], width, width, *scope),
        )
        return [Row(int(r[0]), *r[1:]) for r in found]

    def delete(self, scope: Scope, session_id: str | None, message_ids: Sequence[str] | None) -> Op:
        sql = f"DELETE FROM {self.items} WHERE tenant = %s AND user_id = %s"
        params: list[Any] = [*scope]
        if session_id is not None:
            sql += " AND session_id = %s"
            params.append(session_id)
        if message_ids is not None:
            sql += " AND message_id = ANY(%s)"
            params.append(list(message_ids))
        n = yield Q.run(sql, params)
        return n
