"""The scale-out recall backend: PostgreSQL + pgvector, in the store's schema.

- ``convomem_recall_items``: one row per item, scoped by ``(tenant, user_id)``, with its
  ``terms`` (``analyze.terms``: folded, stop words out, stemmed, in Python, as the SQLite
  partition indexes them) and a ``tsvector`` generated from them (``simple``; a GIN
  index) and a ``vector`` column holding the item's first key (its whole text); an HNSW
  index (cosine) over it is made when the first vectors fix the dimension (kept in
  ``convomem_recall_meta``).
- ``convomem_recall_keys``: an item's other keys (its sentences, its exchange, its
  facts), one row each, numbered from 1, with the item's scope, kind and time copied so
  a filtered search needs no join; deleted with their item (``ON DELETE CASCADE``); an
  HNSW index like the items'. Items stored before keys existed have none and are
  searched by ``vec`` alone.
- Lexical relevance is BM25 over each query word's newest matches of the user, its
  share of ``LEXICAL_WINDOW`` (binary term frequency, document length in distinct
  words, document frequencies and the average length counted within those matches:
  per-user statistics that come with the rows, no table-wide ones leak between users);
  vector search ranks an item by its best key: the HNSW indexes with
  ``hnsw.iterative_scan = relaxed_order`` (pgvector >= 0.8), so a filtered search still
  finds k items of the user; older pgvector gets an exact search over the user's rows.
- A trigger deletes a session's items (their keys by the cascade) when the store deletes
  the session.

The tables' DDL is ``_pg_tables``'s, the ``terms`` column's ``_pg_terms``'s. Operations are
generators of statements (``Q``) run by the store database's sync or async driver
(``run_statements``).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Sequence
from typing import Any

from .._expiry import expired_sessions_sql
from ..errors import ConfigError
from ..stores.statements import Q
from ._backend import Item, Row, Scope, embedding_meta
from ._pg_tables import Tables, hnsw, migrate
from ._pg_terms import index_terms
from .fusion import K1, VECTOR_TOLERANCE, B

Op = Generator[Q, Any, Any]

_COLUMNS = "rid, session_id, message_id, seq, kind, created_at, text"
LEXICAL_WINDOW = 2000
"""Matches ranked at most, shared by the query's words: each word's newest
``LEXICAL_WINDOW // words`` (500 each for four words). Ranking every row a common word
matches made one-user searches slow; a rare word's matches all fit its share."""


def _literal(vec: Any) -> str:
    return "[" + ",".join(map(repr, vec.tolist())) + "]"


def _keys(np: Any, it: Item, dim: int) -> Any:
    """The item's key vectors as an ``(n_keys, dim)`` array (raises on a ragged ``vec``)."""
    n, rest = divmod(len(it.vec), 4 * dim) if dim > 0 else (0, 1)
    if rest or n < 1:
        raise ConfigError(
            f"vec of message {it.message_id!r}: {len(it.vec)} bytes is not one or more "
            f"vectors of {dim} float32 numbers"
        )
    return np.frombuffer(it.vec, dtype=np.float32).reshape(n, dim)


def _extra_keys(
    np: Any, chunk: Sequence[Item], vectors: Sequence[Any]
) -> tuple[list[str], list[str], list[int], list[str]]:
    """The keys after the first of each item, as ``unnest`` columns (session id, message
    id, key number, vector literal); zero keys are left out (they match nothing)."""
    sids, mids, ks, lits = list[str](), list[str](), list[int](), list[str]()
    seen = set[tuple[str, str]]()
    for it, keys in zip(chunk, vectors, strict=True):
        if (it.session_id, it.message_id) in seen:
            continue  # stored once; its first occurrence's keys
        seen.add((it.session_id, it.message_id))
        for k in range(1, keys.shape[0]):
            if np.any(keys[k]):
                sids.append(it.session_id)
                mids.append(it.message_id)
                ks.append(k)
                lits.append(_literal(keys[k]))
    return sids, mids, ks, lits


def _merge(best: dict[int, float], rows: Sequence[Sequence[Any]]) -> dict[int, float]:
    """``best`` with each row's ``(rid, cosine)`` kept when above its rid's (NaN: a zero
    vector, no match)."""
    for r in rows:
        rid, c = int(r[0]), float(r[1])
        if c == c and c > best.get(rid, -math.inf):
            best[rid] = c
    return best


def _best(best: dict[int, float], n: int) -> list[tuple[int, float]]:
    found = sorted(best.items(), key=lambda rc: (-rc[1], -rc[0]))[:n]
    return [(r, c) for r, c in found if c > VECTOR_TOLERANCE]


KEY_CANDIDATES = 2
"""Key rows fetched per item wanted, at first: an item may have several keys near the
top; ``vector`` fetches four times more while the best items are not settled by those
(at 10^4 messages of ~3.8 keys, 2 settled 98% of searches at once; 4 cost ~1.7x more)."""


class PgRecall:
    """The PostgreSQL dialect of the recall operations."""

    name = "postgresql"

    def __init__(self, np: Any, schema: str) -> None:
        self.np = np
        self.tables = Tables.in_schema(schema)
        self.schema, self.items = schema, self.tables.items
        self.meta, self.keys = self.tables.meta, self.tables.keys
        self.dim: int | None = None
        self.model: str | None = None  # the embedder's name (set by the index)
        self.built_with: str | None = None  # the name the index's vectors were made by
        self.iterative: bool | None = None

    def migrate(self) -> Op:
        return migrate(self.tables)

    def _version(self) -> Op:
        if self.iterative is None:
            row = yield Q.one("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            parts = tuple(int(p) for p in str(row[0]).split(".")[:2] if p.isdigit())
            self.iterative = parts >= (0, 8)
        return self.iterative

    def _dim(self, given: int | None) -> Op:
        recorded = yield from embedding_meta(
            self,
            given,
            f"SELECT key, value FROM {self.meta} WHERE key IN ('dim', 'model')",
            f"INSERT INTO {self.meta} VALUES (%s, %s) ON CONFLICT DO NOTHING",
        )
        if recorded and self.dim is not None:
            yield from hnsw(self.tables, self.dim)
        return self.dim

    def known(self, scope: Scope, session_id: str, ids: Sequence[str]) -> Op:
        rows = yield Q.all(
            f"SELECT message_id, text FROM {self.items} WHERE tenant = %s AND user_id = %s "
            "AND session_id = %s AND message_id = ANY(%s)",
            (*scope, session_id, list(ids)),
        )
        return dict(rows)

    def insert(self, scope: Scope, items: Sequence[Item], dim: int) -> Op:
        """Store the new items and their extra keys in one statement per 500 items (the
        keys of the items ``ON CONFLICT`` skipped are skipped too); how many items."""
        np = self.np
        vectors = [_keys(np, it, dim) for it in items]  # raises before anything is sent
        yield from self._dim(dim)
        total = 0
        for i in range(0, len(items), 500):
            chunk = items[i : i + 500]
            rows = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::vector)"] * len(chunk))
            params = [
                v
                for it, keys in zip(chunk, vectors[i : i + 500], strict=True)
                for v in (
                    *scope,
                    *(it.session_id, it.message_id, it.seq, it.kind, it.created_at, it.text),
                    index_terms(it.text),
                    _literal(keys[0]),
                )
            ]
            insert = (
                f"INSERT INTO {self.items} (tenant, user_id, session_id, message_id, seq, kind, "
                f"created_at, text, terms, vec) VALUES {rows} "
                "ON CONFLICT (tenant, user_id, session_id, message_id) DO NOTHING"
            )
            extra = _extra_keys(np, chunk, vectors[i : i + 500])
            if not extra[0]:
                total += yield Q.run(insert, params)
                continue
            row = yield Q.one(
                f"WITH ins AS ({insert} RETURNING rid, session_id, message_id, kind, created_at), "
                f"k AS (INSERT INTO {self.keys} (rid, k, tenant, user_id, kind, created_at, vec) "
                "SELECT ins.rid, e.k, %s, %s, ins.kind, ins.created_at, e.v::vector FROM ins "
                "JOIN unnest(%s::text[], %s::text[], %s::int[], %s::text[]) AS e(sid, mid, k, v) "
                "ON e.sid = ins.session_id AND e.mid = ins.message_id) "
                "SELECT count(*) FROM ins",
                (*params, *scope, *extra),
            )
            total += int(row[0])
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
        words = list(dict.fromkeys(terms))  # letters and digits only (query_terms)
        extra, params = self._filters(kinds, as_of)
        # Each word's window: its newest matches (one branch a word, the word a
        # parameter the planner sees: a common word walks the user's rows newest first, a
        # rare one reads its few matches). Their union is scored by BM25, every query
        # word checked on every row, document frequencies counted within the union.
        window = (
            f"(SELECT rid, tsv FROM {self.items} WHERE tenant = %s AND user_id = %s "
            f"AND tsv @@ to_tsquery('simple', %s){extra} ORDER BY rid DESC "
            f"LIMIT {max(1, LEXICAL_WINDOW // len(words))})"
        )
        rows = yield Q.all(
            "WITH q AS MATERIALIZED (SELECT i, to_tsquery('simple', t) AS q "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i)), "
            f"m AS (SELECT DISTINCT ON (rid) rid, tsv, length(tsv) AS dl FROM "
            f"({' UNION ALL '.join([window] * len(words))}) x), "
            "w AS (SELECT count(*)::float8 AS n, greatest(avg(dl), 1)::float8 AS avgdl FROM m), "
            "h AS (SELECT m.rid, m.dl, q.i FROM m JOIN q ON m.tsv @@ q.q), "
            "d AS (SELECT i, count(*)::float8 AS df FROM h GROUP BY i) "
            "SELECT h.rid, sum(ln(1 + (w.n - d.df + 0.5) / (d.df + 0.5)) * "
            f"{K1 + 1.0} / (1 + {K1} * (1 - {B} + {B} * h.dl / w.avgdl))) AS s "
            "FROM h JOIN d USING (i), w GROUP BY h.rid ORDER BY s DESC, h.rid DESC LIMIT %s",
            (words, *[v for w in words for v in (*scope, w, *params)], n),
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
        """The ``n`` best items by their best key's cosine to ``query``.

        With HNSW, one statement takes the ``n`` nearest items (by ``vec``) and the nearest
        ``KEY_CANDIDATES * n`` key rows. An item whose best key was not fetched is below
        the last key fetched, so once the ``n``-th best item found is above that key the
        answer is settled; otherwise (many keys of few items at the top) more keys are
        fetched. The exact path ranks all the user's items and keys in one statement.
        """
        dim = yield from self._dim(None)
        if dim is None or query.shape[0] != dim:
            return []
        iterative = yield from self._version()
        extra, params = self._filters(kinds, as_of)
        lit = _literal(query)
        dist = f"(vec::vector({dim})) <=> %s::vector({dim})"
        mine = f"WHERE tenant = %s AND user_id = %s{extra}"
        if not iterative:
            rows = yield Q.all(
                f"WITH mine AS MATERIALIZED (SELECT rid, vec FROM {self.items} {mine} "
                f"UNION ALL SELECT rid, vec FROM {self.keys} {mine}), "
                f"d AS (SELECT rid, 1 - ({dist}) AS c FROM mine) "
                "SELECT rid, max(c) AS c FROM d WHERE c <> 'NaN' GROUP BY rid "
                "ORDER BY c DESC, rid DESC LIMIT %s",
                (*scope, *params, *scope, *params, lit, n),
            )
            return _best(_merge({}, rows), n)
        m = KEY_CANDIDATES * n
        yield Q.run(
            "BEGIN; SET LOCAL hnsw.iterative_scan = relaxed_order; "
            f"SET LOCAL hnsw.ef_search = {min(1000, max(40, n))}"
        )
        near_keys = f"SELECT rid, 1 - ({dist}), 1 FROM {self.keys} {mine} ORDER BY {dist} LIMIT %s"
        rows = yield Q.all(
            f"(SELECT rid, 1 - ({dist}), 0 FROM {self.items} {mine} ORDER BY {dist} LIMIT %s) "
            f"UNION ALL ({near_keys})",
            (lit, *scope, *params, lit, n, lit, *scope, *params, lit, m),
        )
        best = _merge({}, rows)
        while True:
            fetched = [float(r[1]) for r in rows if r[2] == 1]
            if len(fetched) < m:
                break  # every key of the user was fetched
            last = min(fetched)
            ranked = sorted(best.values(), reverse=True)
            if last <= VECTOR_TOLERANCE or (len(ranked) >= n and ranked[n - 1] > last):
                break
            m *= 4
            rows = yield Q.all(near_keys, (lit, *scope, *params, lit, m))
            best = _merge(best, rows)
        yield Q.run("COMMIT")
        return _best(best, n)

    def expired(self, scope: Scope, now: float) -> Op:
        """The ids of the user's expired sessions (``stores.expiry``: hidden at once)."""
        sql = expired_sessions_sql("postgresql", f"{self.schema}.convomem_sessions")
        found = yield Q.all(sql, (*scope, now, now))
        return {str(r[0]) for r in found}

    def rids_in(self, scope: Scope, sessions: Sequence[str]) -> Op:
        """The ids of the user's items in ``sessions``."""
        found = yield Q.all(
            f"SELECT rid FROM {self.items} WHERE tenant = %s AND user_id = %s "
            "AND session_id = ANY(%s)",
            (*scope, list(sessions)),
        )
        return {int(r[0]) for r in found}

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

    def snapshot_due(self, scope: Scope) -> bool:
        """Never: PostgreSQL searches in the database, there is no partition to load."""
        return False

    def forget(self, scope: Scope) -> Op:
        """Nothing to do: PostgreSQL keeps no per-user row beside the items."""
        yield from ()

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
