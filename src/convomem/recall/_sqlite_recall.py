"""The embedded recall backend: tables beside the sessions in the same SQLite database.

- ``convomem_recall_items``: one row per indexed item, scoped by ``(tenant, user_id)``,
  with its text, kind, session, seq, time and unit key vectors (``vec``: float32 bytes,
  one vector or several concatenated, see ``_backend.Item``).
- ``convomem_recall_users``: per user, counters of items added and removed (kept by
  triggers), which tell a process whether its in-memory partition of that user is still
  current: appends are loaded incrementally, a removal reloads the user.
- A trigger deletes a session's items when the store deletes the session
  (``delete_session``, ``erase_user``, TTL expiry), so erasing a user removes vectors too;
  another deletes the user's counters when their last session goes (as ``erase_user``
  of the index does), so nothing names an erased user. Their counters would start again
  from zero, so both bump the ``epoch`` in ``convomem_recall_meta``: a process that sees
  it move drops every partition it holds (no partition of an erased user survives,
  even where the new counters happen to equal the old ones).

Search is exact and in memory (``_partition``): BM25F over an inverted index of the
user's texts and their session neighbours', and one float32 matrix product over the
user's vectors (numpy). Earlier
versions kept an FTS5 index; ``migrate`` drops it (FTS5's per-row ``bm25()`` was what
made a query with a common word slow). Operations are generators of statements (``Q``),
run by the store database (``run_statements``) on its own connections.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Generator, Sequence
from typing import Any, Final

from .._expiry import expired_sessions_sql
from ..stores.statements import Q
from . import _partition, _snapshot
from ._backend import Item, Row, Scope, embedding_meta
from ._partition import Partition
from ._snapshot import MIN_ROWS

Op = Generator[Q, Any, Any]

_BUMP: Final = (
    "UPDATE convomem_recall_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'epoch'"
)
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
    "CREATE INDEX IF NOT EXISTS convomem_recall_by_seq "
    "ON convomem_recall_items (tenant, user_id, session_id, seq)",
    """CREATE TABLE IF NOT EXISTS convomem_recall_users (
        tenant TEXT NOT NULL, user_id TEXT NOT NULL,
        added INTEGER NOT NULL DEFAULT 0, removed INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant, user_id)
    ) WITHOUT ROWID""",
    "CREATE TABLE IF NOT EXISTS convomem_recall_meta (key TEXT PRIMARY KEY, value TEXT)",
    # the FTS5 index of earlier versions, and the triggers that fed it
    "DROP TRIGGER IF EXISTS convomem_recall_ai",
    "DROP TRIGGER IF EXISTS convomem_recall_ad",
    "DROP TABLE IF EXISTS convomem_recall_vocab",
    "DROP TABLE IF EXISTS convomem_recall_fts",
    """CREATE TRIGGER IF NOT EXISTS convomem_recall_added
    AFTER INSERT ON convomem_recall_items
    BEGIN
        INSERT INTO convomem_recall_users (tenant, user_id, added) VALUES
            (new.tenant, new.user_id, 1)
            ON CONFLICT (tenant, user_id) DO UPDATE SET added = added + 1;
    END""",
    """CREATE TRIGGER IF NOT EXISTS convomem_recall_removed
    AFTER DELETE ON convomem_recall_items
    BEGIN
        UPDATE convomem_recall_users SET removed = removed + 1
            WHERE tenant = old.tenant AND user_id = old.user_id;
    END""",
    """CREATE TABLE IF NOT EXISTS convomem_recall_snapshots (
        tenant TEXT NOT NULL, user_id TEXT NOT NULL,
        added INTEGER NOT NULL, removed INTEGER NOT NULL, rows INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (tenant, user_id)
    )""",
    # a snapshot never outlives an item it holds
    """CREATE TRIGGER IF NOT EXISTS convomem_recall_snapshot_gone
    AFTER DELETE ON convomem_recall_items
    BEGIN
        DELETE FROM convomem_recall_snapshots
            WHERE tenant = old.tenant AND user_id = old.user_id;
    END""",
    """CREATE TRIGGER IF NOT EXISTS convomem_recall_session_gone
    AFTER DELETE ON convomem_sessions
    BEGIN
        DELETE FROM convomem_recall_items
            WHERE tenant = old.tenant AND session_id = old.session_id;
    END""",
    "INSERT OR IGNORE INTO convomem_recall_meta (key, value) VALUES ('epoch', '0')",
    """CREATE TRIGGER IF NOT EXISTS convomem_recall_user_gone
    AFTER DELETE ON convomem_sessions
    WHEN old.user_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM convomem_sessions
        WHERE tenant = old.tenant AND user_id = old.user_id)
    BEGIN
        DELETE FROM convomem_recall_users WHERE tenant = old.tenant AND user_id = old.user_id;
        """
    + _BUMP
    + """;
    END""",
)
_COUNTERS: Final = (
    "SELECT (SELECT value FROM convomem_recall_meta WHERE key = 'epoch'), u.added, u.removed "
    "FROM (SELECT 1) LEFT JOIN convomem_recall_users AS u ON u.tenant = ? AND u.user_id = ?"
)

_COLUMNS: Final = "rid, session_id, message_id, seq, kind, created_at, text"
LOAD_PAGE: Final = 20_000
"""Rows read per statement when a partition is loaded (bounds the memory a load takes)."""
MAX_BYTES: Final = 2 << 30
"""Memory the in-memory partitions of one index may hold (least recently used go)."""


def scope_token(scope: Scope) -> str:
    """A hash naming a user's partition (kept in the rows' ``scope`` column)."""
    raw = f"{len(scope.tenant)}:{scope.tenant}{scope.user_id}".encode("utf-8", "surrogatepass")
    return "u" + hashlib.blake2b(raw, digest_size=12).hexdigest()


def _rest(it: Item, token: str) -> tuple[Any, ...]:
    return (it.created_at, it.text, token, it.vec)


class SQLiteRecall:
    """The SQLite dialect of the recall operations, and this process's partitions."""

    name = "sqlite"

    def __init__(self, np: Any, *, max_users: int = 4096, max_bytes: int = MAX_BYTES) -> None:
        self.np = np
        self.max_users = max_users
        self.max_bytes = max_bytes
        self.dim: int | None = None
        self.model: str | None = None  # the embedder's name (set by the index)
        self.built_with: str | None = None  # the name the index's vectors were made by
        self.loaded_rows = 0  # rows read into partitions (a work count for tests)
        self._lock = threading.Lock()
        self._parts: dict[Scope, Partition] = {}
        self._due: set[Scope] = set()  # partitions to save as snapshots
        self._saved: dict[Scope, int] = {}  # rows of the last snapshot saved, per scope
        self._epoch: object = None  # the epoch the partitions were loaded under

    def migrate(self) -> Op:
        for sql in SCHEMA:
            yield Q.run(sql)

    def _dim(self, given: int | None) -> Op:
        yield from embedding_meta(
            self,
            given,
            "SELECT key, value FROM convomem_recall_meta WHERE key IN ('dim', 'model')",
            "INSERT OR IGNORE INTO convomem_recall_meta VALUES (?, ?)",
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

    def _partition(self, scope: Scope) -> Op:
        """The scope's partition, current: only rows added since the last look are read;
        a removal (the user's ``removed`` counter moved) rebuilds it. None: no items."""
        dim = yield from self._dim(None)
        if dim is None:
            return None
        epoch, added, removed = yield Q.one(_COUNTERS, scope)
        added, removed = added or 0, removed or 0
        with self._lock:
            if epoch != self._epoch:  # a user was erased: no partition is trusted
                self._parts.clear()
                self._epoch = epoch
            part = self._parts.pop(scope, None)
            if part is not None:
                self._parts[scope] = part  # most recently used last
        if part is not None and (part.added, part.removed) == (added, removed):
            return part
        if part is None or part.removed != removed or part.dim != dim:
            part = Partition(self.np, dim)
            # only a user with as many items as a snapshot needs can have one
            saved = (
                None
                if added - removed < MIN_ROWS
                else (
                    yield Q.one(
                        "SELECT removed, data FROM convomem_recall_snapshots "
                        "WHERE tenant = ? AND user_id = ?",
                        scope,
                    )
                )
            )
            if saved is not None and saved[0] == removed:
                restored = _snapshot.load(self.np, saved[1])
                if restored.dim == dim:
                    part = restored
                    with self._lock:
                        self._saved[scope] = part.n
        while True:  # in pages: a user's rows are never all in memory twice
            rows = yield Q.all(
                "SELECT rid, kind, created_at, text, vec, session_id, seq "
                "FROM convomem_recall_items WHERE tenant = ? AND user_id = ? AND rid > ? "
                "ORDER BY rid LIMIT ?",
                (*scope, part.top, LOAD_PAGE),
            )
            self.loaded_rows += len(rows)
            last = len(rows) < LOAD_PAGE
            part.extend(rows, *((added, removed) if last else (-1, -1)))  # current once all read
            if last:
                break
        with self._lock:
            self._parts[scope] = part
            self._evict(part)
            if part.n >= self._saved.get(scope, 0) * _snapshot.GROWTH and part.n >= MIN_ROWS:
                self._due.add(scope)
        return part

    def snapshot_due(self, scope: Scope) -> bool:
        """Whether this process built the scope's partition past its last snapshot
        (``_snapshot``): the search that built it then saves it (``save_snapshot``)."""
        with self._lock:
            return scope in self._due

    def save_snapshot(self, scope: Scope) -> Op:
        """Save the scope's partition as its snapshot, unless an item was removed since
        it was built (a write call; a snapshot saved by another process is replaced only
        by one holding more rows)."""
        with self._lock:
            self._due.discard(scope)
            part = self._parts.get(scope)
        if part is None:
            return False
        row = yield Q.one(
            "SELECT removed FROM convomem_recall_users WHERE tenant = ? AND user_id = ?", scope
        )
        if row is None or row[0] != part.removed:
            return False
        with part.lock:
            data, rows, added = _snapshot.dump(self.np, part), part.n, part.added
        n = yield Q.run(
            "INSERT INTO convomem_recall_snapshots VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant, user_id) DO UPDATE SET added = excluded.added, "
            "removed = excluded.removed, rows = excluded.rows, data = excluded.data "
            "WHERE excluded.rows > convomem_recall_snapshots.rows",
            (*scope, added, part.removed, rows, data),
        )
        with self._lock:
            self._saved[scope] = rows
        return bool(n)

    def _evict(self, keep: Partition) -> None:
        parts = self._parts
        while len(parts) > self.max_users:
            del parts[next(iter(parts))]
        total = sum(p.nbytes() for p in parts.values())
        for scope in list(parts):
            if total <= self.max_bytes:
                break
            if parts[scope] is not keep:
                total -= parts.pop(scope).nbytes()

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
        part = yield from self._partition(scope)
        if part is None:
            return []
        return _partition.lexical(self.np, part, terms, n, kinds, as_of)

    def vector(
        self,
        scope: Scope,
        query: Any,
        n: int,
        kinds: Sequence[str] | None,
        as_of: float | None,
    ) -> Op:
        part = yield from self._partition(scope)
        if part is None or query.shape[0] != part.dim:
            return []
        return _partition.vector(self.np, part, query, n, kinds, as_of)

    def expired(self, scope: Scope, now: float) -> Op:
        """The ids of the user's expired sessions (``stores.expiry``: hidden at once)."""
        found = yield Q.all(expired_sessions_sql("sqlite"), (*scope, now, now))
        return {str(r[0]) for r in found}

    def rids_in(self, scope: Scope, sessions: Sequence[str]) -> Op:
        """The ids of the user's items in ``sessions``."""
        out: set[int] = set()
        ids = sorted(sessions)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            found = yield Q.all(
                "SELECT rid FROM convomem_recall_items WHERE tenant = ? AND user_id = ? "
                f"AND session_id IN ({', '.join('?' * len(chunk))})",
                (*scope, *chunk),
            )
            out.update(int(r[0]) for r in found)
        return out

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

    def near(self, scope: Scope, around: Sequence[tuple[str, int]], width: int) -> Op:
        """The items of the scope within ``width`` seqs of each ``(session_id, seq)``."""
        out: list[Row] = []
        for i in range(0, len(around), 100):
            chunk = around[i : i + 100]
            cond = " OR ".join(["(session_id = ? AND seq BETWEEN ? AND ?)"] * len(chunk))
            params: list[Any] = [*scope]
            for sid, seq in chunk:
                params += [sid, seq - width, seq + width]
            found = yield Q.all(
                f"SELECT {_COLUMNS} FROM convomem_recall_items WHERE tenant = ? AND "
                f"user_id = ? AND ({cond})",
                params,
            )
            out += [Row(*r) for r in found]
        return out

    def forget(self, scope: Scope) -> Op:
        """Delete the user's counters (after their items): nothing names the user."""
        yield Q.run("DELETE FROM convomem_recall_users WHERE tenant = ? AND user_id = ?", scope)
        yield Q.run(_BUMP)

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
