"""The embedded recall backend: tables beside the sessions in the same SQLite database.

- ``convomem_recall_items``: one row per indexed item, scoped by ``(tenant, user_id)``,
  with its text, kind, session, seq, time and unit vector (float32 bytes).
- ``convomem_recall_fts``: an FTS5 index (``unicode61``, diacritics folded) over the
  items' text and a per-user scope token, so a lexical query intersects the user's
  posting list instead of filtering everyone's hits; BM25 weighs the text column only.
- ``convomem_recall_users``: per user, counters of items added and removed (kept by
  triggers), which tell a process whether its in-memory matrix of that user's vectors
  is still current: appends are loaded incrementally, a removal reloads the user.
- A trigger deletes a session's items when the store deletes the session
  (``delete_session``, ``erase_user``, TTL expiry), so erasing a user removes vectors too.

Vector search is exact: one float32 matrix product over the user's partition (numpy).
Operations are generators of statements (``Q``), run on the store's own connections.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Generator, Sequence
from typing import Any, Final

from ..errors import ConfigError
from ._backend import Item, Q, Row, Scope
from .fusion import VECTOR_TOLERANCE

Op = Generator[Q, Any, Any]

SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS convomem_recall_items (
        rid INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        seq INTEGER,
        kind TEXT NOT NULL,
        created_at REAL NOT NULL,
        text TEXT NOT NULL,
        scope TEXT NOT NULL,
        vec BLOB NOT NULL,
        UNIQUE (tenant, user_id, session_id, message_id)
    )""",
    "CREATE INDEX IF NOT EXISTS convomem_recall_by_user "
    "ON convomem_recall_items (tenant, user_id, rid)",
    "CREATE INDEX IF NOT EXISTS convomem_recall_by_session "
    "ON convomem_recall_items (tenant, session_id)",
    """CREATE VIRTUAL TABLE IF NOT EXISTS convomem_recall_fts USING fts5(
        scope, text, content='convomem_recall_items', content_rowid='rid',
        tokenize='unicode61 remove_diacritics 2'
    )""",
    """CREATE TABLE IF NOT EXISTS convomem_recall_users (
        tenant TEXT NOT NULL, user_id TEXT NOT NULL,
        added INTEGER NOT NULL DEFAULT 0, removed INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant, user_id)
    ) WITHOUT ROWID""",
    "CREATE TABLE IF NOT EXISTS convomem_recall_meta (key TEXT PRIMARY KEY, value TEXT)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS convomem_recall_vocab "
    "USING fts5vocab('convomem_recall_fts', 'row')",
    """CREATE TRIGGER IF NOT EXISTS convomem_recall_ai AFTER INSERT ON convomem_recall_items
    BEGIN
        INSERT INTO convomem_recall_fts (rowid, scope, text) VALUES (new.rid, new.scope, new.text);
        INSERT INTO convomem_recall_users (tenant, user_id, added) VALUES
            (new.tenant, new.user_id, 1)
            ON CONFLICT (tenant, user_id) DO UPDATE SET added = added + 1;
    END""",
    """CREATE TRIGGER IF NOT EXISTS convomem_recall_ad AFTER DELETE ON convomem_recall_items
    BEGIN
        INSERT INTO convomem_recall_fts (convomem_recall_fts, rowid, scope, text)
            VALUES ('delete', old.rid, old.scope, old.text);
        UPDATE convomem_recall_users SET removed = removed + 1
            WHERE tenant = old.tenant AND user_id = old.user_id;
    END""",
    """CREATE TRIGGER IF NOT EXISTS convomem_recall_session_gone
    AFTER DELETE ON convomem_sessions
    BEGIN
        DELETE FROM convomem_recall_items
            WHERE tenant = old.tenant AND session_id = old.session_id;
    END""",
)

_COLUMNS: Final = "rid, session_id, message_id, seq, kind, created_at, text"
LEXICAL_BUDGET: Final = 1000
"""Rows a lexical query may match before its most common terms are dropped."""


def scope_token(scope: Scope) -> str:
    """The FTS token naming a user's partition (a hash: letters and digits only)."""
    raw = f"{len(scope.tenant)}:{scope.tenant}{scope.user_id}".encode("utf-8", "surrogatepass")
    return "u" + hashlib.blake2b(raw, digest_size=12).hexdigest()


def _rest(it: Item, token: str) -> tuple[Any, ...]:
    return (it.created_at, it.text, token, it.vec)


def _filters(kinds: Sequence[str] | None, as_of: float | None) -> tuple[str, list[Any]]:
    sql, params = "", list[Any]()
    if kinds is not None:
        sql += f" AND i.kind IN ({', '.join('?' * len(kinds))})"
        params += list(kinds)
    if as_of is not None:
        sql += " AND i.created_at <= ?"
        params.append(as_of)
    return sql, params


class _Partition:
    """One user's vectors in memory: a growable float32 matrix and its row facts."""

    __slots__ = ("added", "created", "kinds", "mat", "n", "removed", "rids", "top")

    def __init__(self, np: Any, dim: int) -> None:
        self.n = 0
        self.added = self.removed = -1
        self.top = 0  # the largest rid loaded
        self.mat = np.empty((16, dim), dtype=np.float32)
        self.rids = np.empty(16, dtype=np.int64)
        self.created = np.empty(16, dtype=np.float64)
        self.kinds = np.empty(16, dtype=object)

    def extend(self, np: Any, rows: list[Any]) -> None:
        m = self.n + len(rows)
        if m > self.mat.shape[0]:
            size = max(m, 2 * self.mat.shape[0])
            for name in ("mat", "rids", "created", "kinds"):
                old = getattr(self, name)
                new = np.empty((size, *old.shape[1:]), dtype=old.dtype)
                new[: self.n] = old[: self.n]
                setattr(self, name, new)
        if rows:
            blob = b"".join(r[3] for r in rows)
            self.mat[self.n : m] = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), -1)
            self.rids[self.n : m] = [r[0] for r in rows]
            self.created[self.n : m] = [r[2] for r in rows]
            self.kinds[self.n : m] = [r[1] for r in rows]
            self.top = max(self.top, int(self.rids[m - 1]))
        self.n = m


class SQLiteRecall:
    """The SQLite dialect of the recall operations, and this process's vector cache."""

    name = "sqlite"

    def __init__(self, np: Any, *, max_users: int = 4096) -> None:
        self.np = np
        self.max_users = max_users
        self.dim: int | None = None
        self._lock = threading.Lock()
        self._parts: dict[Scope, _Partition] = {}
        self._df: dict[str, tuple[int, int]] = {}  # term -> (rows with it, rows then)

    def migrate(self) -> Op:
        for sql in SCHEMA:
            yield Q.run(sql)

    def _dim(self, given: int | None) -> Op:
        if self.dim is None:
            row = yield Q.one("SELECT value FROM convomem_recall_meta WHERE key = 'dim'")
            if row is not None:
                self.dim = int(row[0])
            elif given is not None:
                yield Q.run("INSERT INTO convomem_recall_meta VALUES ('dim', ?)", (str(given),))
                self.dim = given
        if given is not None and self.dim != given:
            raise ConfigError(
                f"embedder: gives vectors of {given} numbers, but this recall index holds "
                f"vectors of {self.dim}; use the embedder it was built with"
            )
        return self.dim

    def known(self, scope: Scope, session_id: str, ids: Sequence[str]) -> Op:
        found: dict[str, str] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            rows = yield Q.all(
                "SELECT message_id, text FROM convomem_recall_items WHERE tenant = ? AND "
                f"user_id = ? AND session_id = ? AND message_id IN ({', '.join('?' * len(chunk))})",
                (scope.tenant, scope.user_id, session_id, *chunk),
            )
            found.update(rows)
        return found

    def insert(self, scope: Scope, items: Sequence[Item], dim: int) -> Op:
        yield from self._dim(dim)
        token = scope_token(scope)
        n = yield Q.many(
            "INSERT INTO convomem_recall_items (tenant, user_id, session_id, message_id, seq, "
            "kind, created_at, text, scope, vec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant, user_id, session_id, message_id) DO NOTHING",
            [
                (*scope, it.session_id, it.message_id, it.seq, it.kind, *_rest(it, token))
                for it in items
            ],
        )
        return n

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
        terms, mine = yield from self._useful(scope, terms)
        if not terms:
            return []
        words = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        if kinds is None and as_of is None and mine <= LEXICAL_BUDGET:
            # A small partition: its scope token narrows the match at once (BM25 counts
            # the token's rows too, which is why a large partition is joined instead).
            # rows() checks tenant and user again before anything is returned.
            rows = yield Q.all(
                "SELECT rowid, bm25(convomem_recall_fts, 0.0, 1.0) AS s "
                "FROM convomem_recall_fts WHERE convomem_recall_fts MATCH ? "
                "ORDER BY s, rowid LIMIT ?",
                (f"scope : {scope_token(scope)} AND text : ({words})", n),
            )
        else:
            extra, params = _filters(kinds, as_of)
            rows = yield Q.all(
                "SELECT i.rid, bm25(convomem_recall_fts, 0.0, 1.0) AS s "
                "FROM convomem_recall_fts JOIN convomem_recall_items i "
                "ON i.rid = convomem_recall_fts.rowid "
                f"WHERE convomem_recall_fts MATCH ? AND i.tenant = ? AND i.user_id = ?{extra} "
                "ORDER BY s, i.rid LIMIT ?",
                (f"text : ({words})", scope.tenant, scope.user_id, *params, n),
            )
        return [(int(rid), -float(s)) for rid, s in rows]

    def _useful(self, scope: Scope, terms: Sequence[str]) -> Op:
        """The query terms worth matching. Scoring every row a term matches is what
        makes a query slow, so when a term matches more than ``LEXICAL_BUDGET`` rows:
        not if it is in half the rows or more (FTS5's BM25 gives it an IDF of 1e-6: it
        only breaks ties), and only the rarest terms within that budget. Below the
        budget the ranking is exact BM25."""
        row = yield Q.one(
            "SELECT sum(added - removed), sum(CASE WHEN tenant = ? AND user_id = ? "
            "THEN added - removed END) FROM convomem_recall_users",
            scope,
        )
        total, mine = int(row[0] or 0), int(row[1] or 0)
        # Document frequencies only steer this choice (BM25 computes its own), and
        # counting them reads the terms' whole posting lists: cache them until the
        # table has grown or shrunk by a tenth.
        cache = self._df
        df: dict[str, int] = {}
        missing = []
        for t in terms:
            seen = cache.get(t)
            if seen is not None and abs(seen[1] - total) * 10 <= max(total, 10):
                df[t] = seen[0]
            else:
                missing.append(t)
        if missing:
            found = yield Q.all(
                "SELECT term, doc FROM convomem_recall_vocab "
                f"WHERE term IN ({', '.join('?' * len(missing))})",
                tuple(missing),
            )
            counted = dict(found)
            if len(cache) > 200_000:
                cache.clear()
            for t in missing:
                df[t] = counted.get(t, 0)
                cache[t] = (df[t], total)
        kept = sorted(
            (t for t in terms if df[t] <= LEXICAL_BUDGET or 2 * df[t] < total),
            key=lambda t: df.get(t, 0),
        )
        out: list[str] = []
        matched = 0
        for t in kept:
            if out and matched + df.get(t, 0) > LEXICAL_BUDGET:
                break
            out.append(t)
            matched += df.get(t, 0)
        return out, mine

    def _partition(self, scope: Scope, dim: int) -> Op:
        """The scope's current vectors, loading only what changed since last time."""
        np = self.np
        row = yield Q.one(
            "SELECT added, removed FROM convomem_recall_users WHERE tenant = ? AND user_id = ?",
            scope,
        )
        added, removed = (0, 0) if row is None else row
        with self._lock:
            part = self._parts.pop(scope, None)
            if part is not None:
                self._parts[scope] = part  # most recently used last
        if part is not None and (part.added, part.removed) == (added, removed):
            return part
        if part is None or part.removed != removed or part.mat.shape[1] != dim:
            part, after = _Partition(np, dim), 0
        else:
            after = part.top
        rows = yield Q.all(
            "SELECT rid, kind, created_at, vec FROM convomem_recall_items "
            "WHERE tenant = ? AND user_id = ? AND rid > ? ORDER BY rid",
            (*scope, after),
        )
        # A snapshot shares the arrays: it only writes past the rows older snapshots read.
        grown = _Partition.__new__(_Partition)
        for name in _Partition.__slots__:
            setattr(grown, name, getattr(part, name))
        grown.extend(np, rows)
        grown.added, grown.removed = added, removed
        with self._lock:
            self._parts[scope] = grown
            while len(self._parts) > self.max_users:
                del self._parts[next(iter(self._parts))]
        return grown

    def vector(
        self,
        scope: Scope,
        query: Any,
        n: int,
        kinds: Sequence[str] | None,
        as_of: float | None,
    ) -> Op:
        np = self.np
        dim = yield from self._dim(None)
        if dim is None or query.shape[0] != dim:
            return []
        part = yield from self._partition(scope, dim)
        if not part.n:
            return []
        sims = part.mat[: part.n] @ query
        mask = None
        if kinds is not None:
            mask = np.isin(part.kinds[: part.n], list(kinds))
        if as_of is not None:
            when = part.created[: part.n] <= as_of
            mask = when if mask is None else mask & when
        if mask is not None:
            sims = np.where(mask, sims, -np.inf)
        count = min(n, part.n)
        top = np.argpartition(-sims, count - 1)[:count] if count < part.n else np.arange(part.n)
        top = top[np.argsort(-sims[top], kind="stable")]
        sel = sims[top]
        keep = sel > VECTOR_TOLERANCE  # float32 noise around an orthogonal vector
        rids = part.rids[top][keep].tolist()
        return list(zip(rids, sel[keep].astype(float).tolist(), strict=True))

    def rows(self, scope: Scope, rids: Sequence[int]) -> Op:
        out: dict[int, Row] = {}
        for i in range(0, len(rids), 500):
            chunk = rids[i : i + 500]
            found = yield Q.all(
                f"SELECT {_COLUMNS} FROM convomem_recall_items WHERE tenant = ? AND "
                f"user_id = ? AND rid IN ({', '.join('?' * len(chunk))})",
                (*scope, *chunk),
            )
            out.update((r[0], Row(*r)) for r in found)
        return out

    def delete(self, scope: Scope, session_id: str | None, message_ids: Sequence[str] | None) -> Op:
        sql = "DELETE FROM convomem_recall_items WHERE tenant = ? AND user_id = ?"
        params: list[Any] = [*scope]
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        if message_ids is None:
            n = yield Q.run(sql, params)
            return n
        total = 0
        for i in range(0, len(message_ids), 500):
            chunk = message_ids[i : i + 500]
            total += yield Q.run(
                sql + f" AND message_id IN ({', '.join('?' * len(chunk))})", (*params, *chunk)
            )
        return total


def perform(conn: Any, q: Q) -> Any:
    """Run one statement on a store connection (``_sqlite_ops.Conn``)."""
    if q.fetch == "many":
        return conn.many(q.sql, q.params)
    if q.fetch == "run":
        return conn.run(q.sql, q.params).rowcount
    if q.fetch == "one":
        return conn.one(q.sql, q.params)
    return conn.all(q.sql, q.params)
