"""The SQLite operations: plain functions of a connection, shared by the sync and async
databases (which only differ in the thread they run them in).

Each operation gets a ``Tx`` (the connection, the time of the attempt, the TTL policy);
a write operation runs inside ``BEGIN IMMEDIATE`` ... ``COMMIT`` opened by the driver,
so when it raises, the driver rolls back and nothing was written.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from ..errors import (
    ConfigError,
    SessionOwnerMismatch,
    StoreError,
)
from ..model import Message
from .database import LogEntry, SessionInfo, TTLPolicy
from .records import decode_counts, decode_rows, encode_cursor
from .statements import Q

_IN_CHUNK: Final = 500  # ids per IN (...) list, well under SQLite's variable limit


class Conn:
    """A connection with the work ``StoreStats`` reports: ``counts`` is
    ``[statements, transactions, rows_read]``. ``busy`` is held while an operation runs
    on it, so closing the database (from another thread) waits for that operation
    instead of closing the connection under it (which crashes the sqlite3 module)."""

    __slots__ = ("__weakref__", "busy", "counts", "pid", "raw")

    def __init__(self, raw: sqlite3.Connection, pid: int) -> None:
        self.raw = raw
        self.pid = pid
        self.counts = [0, 0, 0]
        self.busy = threading.RLock()

    def run(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        self.counts[0] += 1
        return self.raw.execute(sql, params)

    def many(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        self.counts[0] += 1
        return self.raw.executemany(sql, rows).rowcount

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        self.counts[0] += 1
        row = self.raw.execute(sql, params).fetchone()
        self.counts[2] += row is not None
        return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        self.counts[0] += 1
        rows = self.raw.execute(sql, params).fetchall()
        self.counts[2] += len(rows)
        return rows

    def perform(self, q: Q) -> Any:
        """One statement of a caller's own operation (``run_statements``): ``run`` and
        ``many`` give the row count, ``one`` a row or None, ``all`` the rows."""
        fetch = q.fetch
        if fetch == "run":
            return self.run(q.sql, q.params).rowcount
        if fetch == "one":
            return self.one(q.sql, q.params)
        if fetch == "all":
            return self.all(q.sql, q.params)
        if fetch == "many":
            return self.many(q.sql, q.params)
        raise ConfigError(
            f"Q.fetch={fetch!r}: PostgreSQL's only; SQLite runs run, one, all and many"
        )


class Tx:
    """What an operation runs with: the connection, the attempt's time, the TTL policy.

    (A plain slotted class, not a frozen dataclass: one is made per call, and a frozen
    dataclass's ``__init__`` costs a few microseconds of a ~30 us append.)"""

    __slots__ = ("conn", "now", "ttl")

    def __init__(self, conn: Conn, now: float, ttl: TTLPolicy) -> None:
        self.conn = conn
        self.now = now
        self.ttl = ttl


@dataclass(frozen=True, slots=True)
class Key:
    """A session's name and the user a handle acts for (``tenant`` ``''``: none)."""

    tenant: str
    session_id: str
    user_id: str | None

    @property
    def tenant_or_none(self) -> str | None:
        return self.tenant or None


class Row(NamedTuple):
    pk: int
    user_id: str | None
    created_at: float
    updated_at: float
    expires_at: float | None
    metadata: str
    next_seq: int
    last_seq: int
    message_count: int
    state_version: int


COLS: Final = (
    "pk, user_id, created_at, updated_at, expires_at, metadata, next_seq, last_seq, "
    "message_count, state_version"
)
# Text read as bytes: a row whose text is not UTF-8 is that row's CorruptRecord, instead
# of a decoding error that would fail the whole read.
_MSG: Final = (
    "SELECT seq, CAST(message_id AS BLOB), CAST(data AS BLOB), CAST(counts AS BLOB) "
    "FROM convomem_messages WHERE session_pk = ?"
)
MSG_NO_COUNTS: Final = (
    "SELECT seq, CAST(message_id AS BLOB), CAST(data AS BLOB), NULL "
    "FROM convomem_messages WHERE session_pk = ?"
)


def chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), _IN_CHUNK):
        yield items[i : i + _IN_CHUNK]


def alive(tx: Tx, row: Row) -> bool:
    return row.expires_at is None or row.expires_at > tx.now


def lookup(tx: Tx, key: Key) -> Row | None:
    """The session's row when it exists and has not expired; checks the owner."""
    found = tx.conn.one(
        f"SELECT {COLS} FROM convomem_sessions WHERE tenant = ? AND session_id = ?",
        (key.tenant, key.session_id),
    )
    if found is None:
        return None
    row = Row(*found)
    if not alive(tx, row):
        return None
    if key.user_id is not None and row.user_id != key.user_id:
        raise SessionOwnerMismatch(key.session_id, key.tenant_or_none, key.user_id)
    return row


def _refresh_on_read(tx: Tx, row: Row) -> Row:
    """With ``ttl_refresh="read"`` every access moves the expiry; the row as it is now."""
    if not tx.ttl.on_read:
        return row
    expires = tx.ttl.expires_at(tx.now)
    tx.conn.run("UPDATE convomem_sessions SET expires_at = ? WHERE pk = ?", (expires, row.pk))
    return row._replace(expires_at=expires)


def info_of(key: Key, row: Row) -> SessionInfo:
    try:
        metadata = json.loads(row.metadata)
    except ValueError as exc:
        raise StoreError(f"session {key.session_id!r}: its metadata is not JSON: {exc}") from None
    return SessionInfo(
        key.session_id,
        row.user_id,
        key.tenant_or_none,
        row.created_at,
        row.updated_at,
        row.expires_at,
        metadata,
        row.message_count,
        row.last_seq,
        row.state_version,
    )


# -- reads --------------------------------------------------------------------------


def get_items(tx: Tx, key: Key, limit: int | None) -> list[Message]:
    row = lookup(tx, key)
    if row is None or limit == 0:
        return []
    if limit is None:
        rows = tx.conn.all(MSG_NO_COUNTS + " ORDER BY seq", (row.pk,))
    else:
        rows = tx.conn.all(MSG_NO_COUNTS + " ORDER BY seq DESC LIMIT ?", (row.pk, limit))
        rows.reverse()
    _refresh_on_read(tx, row)
    return [e.message for e in decode_rows(key.session_id, rows)]


def entries(
    tx: Tx, key: Key, position: int | None, limit: int, newest_first: bool
) -> tuple[list[LogEntry], str | None]:
    """A page of the log after (forward) or before (``newest_first``) ``position``."""
    row = lookup(tx, key)
    if row is None:
        return [], None
    if newest_first:
        bound = (1 << 62) if position is None else position
        sql = _MSG + " AND seq < ? ORDER BY seq DESC LIMIT ?"
    else:
        bound = 0 if position is None else position
        sql = _MSG + " AND seq > ? ORDER BY seq LIMIT ?"
    rows = tx.conn.all(sql, (row.pk, bound, limit + 1))
    more = len(rows) > limit
    del rows[limit:]
    cursor = encode_cursor("b" if newest_first else "f", rows[-1][0]) if more else None
    _refresh_on_read(tx, row)
    return decode_rows(key.session_id, rows, cursor=cursor), cursor


def last_seq(tx: Tx, key: Key) -> int:
    row = lookup(tx, key)
    if row is None:
        return 0
    _refresh_on_read(tx, row)
    return row.last_seq


def info(tx: Tx, key: Key) -> SessionInfo | None:
    row = lookup(tx, key)
    if row is None:
        return None
    return info_of(key, _refresh_on_read(tx, row))


def load_state(tx: Tx, key: Key) -> tuple[dict[str, Any] | None, int]:
    row = lookup(tx, key)
    if row is None:
        return None, 0
    found = tx.conn.one("SELECT state FROM convomem_states WHERE session_pk = ?", (row.pk,))
    text = None if found is None else found[0]
    _refresh_on_read(tx, row)
    if text is None:
        return None, row.state_version
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise StoreError(
            f"session {key.session_id!r}: the derived state (version {row.state_version}) "
            f"cannot be read: {exc}"
        ) from None
    return state, row.state_version


def get_counts(tx: Tx, key: Key, ids: list[str] | None) -> dict[str, dict[str, int]]:
    row = lookup(tx, key)
    if row is None:
        return {}
    base = "SELECT message_id, CAST(counts AS BLOB) FROM convomem_messages WHERE session_pk = ?"
    if ids is None:
        rows = tx.conn.all(base, (row.pk,))
    else:
        rows = []
        for part in chunks(ids):
            marks = ",".join("?" * len(part))
            rows += tx.conn.all(f"{base} AND message_id IN ({marks})", (row.pk, *part))
    _refresh_on_read(tx, row)
    return {mid: decode_counts(text) for mid, text in rows}


# -- the database -----------------------------------------------------------------------


def tenant_counts(tx: Tx, user_id: str | None) -> dict[str | None, int]:
    """Live sessions per tenant (None: no tenant), of ``user_id`` when given."""
    where = "(expires_at IS NULL OR expires_at > ?)"
    params: list[Any] = [tx.now]
    if user_id is not None:
        where += " AND user_id = ?"
        params.append(user_id)
    rows = tx.conn.all(
        f"SELECT tenant, count(*) FROM convomem_sessions WHERE {where} GROUP BY tenant",
        tuple(params),
    )
    return {(r[0] or None): int(r[1]) for r in rows}


def list_sessions(
    tx: Tx, tenant: str, user_id: str | None, before: int | None, limit: int
) -> tuple[list[SessionInfo], str | None]:
    where = "tenant = ? AND (expires_at IS NULL OR expires_at > ?) AND pk < ?"
    params: list[Any] = [tenant, tx.now, (1 << 62) if before is None else before]
    if user_id is not None:
        where += " AND user_id = ?"
        params.append(user_id)
    rows = tx.conn.all(
        f"SELECT session_id, {COLS} FROM convomem_sessions WHERE {where} ORDER BY pk DESC LIMIT ?",
        (*params, limit + 1),
    )
    more = len(rows) > limit
    del rows[limit:]
    out = [info_of(Key(tenant, r[0], None), Row(*r[1:])) for r in rows]
    return out, encode_cursor("s", rows[-1][1]) if more else None
