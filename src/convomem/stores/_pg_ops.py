"""The PostgreSQL operations, sans I/O: generators that yield statements (``Q``) and
receive their results, driven by the sync database (``psycopg``) or the async one
(``psycopg`` async) -- only the driver differs.

Reads are one statement each (the session's row joined to the page of its log), so they
see one snapshot and cost one round trip. Writes run in a transaction the driver opens
(``BEGIN; SET LOCAL lock_timeout``) and commits; when a write raises, the driver rolls
back and nothing was written. No statement is prepared on the server (PgBouncer in
transaction mode works).
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import SessionOwnerMismatch, StoreError
from ..model import Message
from ._sqlite_ops import Key, Row, info_of
from .database import LogEntry, SessionInfo, TTLPolicy
from .records import decode_counts, decode_rows, encode_cursor
from .statements import Q

__all__ = ["Key", "Q", "Row", "Tx"]

Op = Generator[Q, Any, Any]


@dataclass(frozen=True, slots=True)
class Tx:
    """What an operation runs with: the quoted schema, the attempt's time, the TTL
    policy and the lock timeout (milliseconds) of write transactions."""

    schema: str
    now: float
    ttl: TTLPolicy
    lock_ms: int

    @property
    def sessions(self) -> str:
        return f"{self.schema}.convomem_sessions"

    @property
    def messages(self) -> str:
        return f"{self.schema}.convomem_messages"

    @property
    def begin(self) -> str:
        return f"BEGIN; SET LOCAL lock_timeout = {self.lock_ms}"


COLS: Final = (
    "s.pk, s.user_id, s.created_at, s.updated_at, s.expires_at, s.metadata, s.next_seq, "
    "s.last_seq, s.message_count, s.state_version"
)
NCOLS: Final = 10
WHERE_KEY: Final = "s.tenant = %s AND s.session_id = %s"


_ESC: Final = "\ufffe"
_UNESCAPE: Final = re.compile("\ufffe(.)", re.DOTALL)


def db_id(mid: str) -> str:
    """A message id as stored. A text column cannot hold U+0000, which an id may: it is
    stored as U+FFFE ``0``, and U+FFFE (a noncharacter) as itself twice; every other id
    is stored as it is."""
    if "\x00" in mid or _ESC in mid:
        return mid.replace(_ESC, _ESC * 2).replace("\x00", _ESC + "0")
    return mid


def py_id(text: str) -> str:
    """The message id ``db_id`` stored as ``text``."""
    if _ESC not in text:
        return text
    return _UNESCAPE.sub(lambda m: _ESC if m.group(1) == _ESC else "\x00", text)


def log_rows(rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """``(seq, message_id, data, counts)`` rows with their ids as given."""
    return [(r[0], py_id(r[1]), r[2], r[3]) for r in rows]


def in_tx(tx: Tx, body: Op) -> Op:
    """``body`` inside a write transaction (the driver rolls back when it raises)."""
    yield Q.run(tx.begin)
    result = yield from body
    yield Q.run("COMMIT")
    return result


def alive(tx: Tx, row: Row) -> bool:
    return row.expires_at is None or row.expires_at > tx.now


def visible(tx: Tx, key: Key, found: Sequence[Any] | None) -> Row | None:
    """The session's row when it exists and has not expired; checks the owner."""
    if found is None:
        return None
    row = Row(*found[:NCOLS])
    if not alive(tx, row):
        return None
    if key.user_id is not None and row.user_id != key.user_id:
        raise SessionOwnerMismatch(key.session_id, key.tenant_or_none, key.user_id)
    return row


def refresh_on_read(tx: Tx, row: Row) -> Generator[Q, Any, Row]:
    """With ``ttl_refresh="read"`` every access moves the expiry; the row as it is now."""
    if not tx.ttl.on_read:
        return row
    expires = tx.ttl.expires_at(tx.now)
    yield Q.run(f"UPDATE {tx.sessions} SET expires_at = %s WHERE pk = %s", (expires, row.pk))
    return row._replace(expires_at=expires)


def _lookup(tx: Tx, key: Key, extra: str = "") -> Generator[Q, Any, tuple[Row | None, Any]]:
    found = yield Q.one(
        f"SELECT {COLS}{extra} FROM {tx.sessions} s WHERE {WHERE_KEY}",
        (key.tenant, key.session_id),
    )
    return visible(tx, key, found), found


def _with_log(tx: Tx, key: Key, inner: str, params: Sequence[Any]) -> Op:
    """The session's row joined to ``inner`` (a query of its messages, ``$pk`` being the
    session's pk): one row per message, or one row of NULL message columns."""
    sql = (
        f"SELECT {COLS}, m.* FROM {tx.sessions} s LEFT JOIN LATERAL ("
        + inner.replace("$pk", "s.pk")
        + f") m ON true WHERE {WHERE_KEY}"
    )
    rows = yield Q.all(sql, (*params, key.tenant, key.session_id))
    return rows


# -- reads --------------------------------------------------------------------------


def get_items(tx: Tx, key: Key, limit: int | None) -> Generator[Q, Any, list[Message]]:
    inner = (
        f"SELECT seq, message_id, data, NULL AS counts FROM {tx.messages} "
        "WHERE session_pk = $pk ORDER BY seq DESC LIMIT %s"
    )
    rows = yield from _with_log(tx, key, inner, (limit,))
    row = visible(tx, key, rows[0] if rows else None)
    if row is None or limit == 0:
        return []
    yield from refresh_on_read(tx, row)
    log = log_rows(r[NCOLS:] for r in reversed(rows) if r[NCOLS] is not None)
    return [e.message for e in decode_rows(key.session_id, log)]


def entries(
    tx: Tx, key: Key, position: int | None, limit: int, newest_first: bool
) -> Generator[Q, Any, tuple[list[LogEntry], str | None]]:
    """A page of the log after (forward) or before (``newest_first``) ``position``."""
    if newest_first:
        bound = (1 << 62) if position is None else position
        where, order = "seq < %s", "DESC"
    else:
        bound = 0 if position is None else position
        where, order = "seq > %s", ""
    inner = (
        f"SELECT seq, message_id, data, counts FROM {tx.messages} "
        f"WHERE session_pk = $pk AND {where} ORDER BY seq {order} LIMIT %s"
    )
    rows = yield from _with_log(tx, key, inner, (bound, limit + 1))
    row = visible(tx, key, rows[0] if rows else None)
    if row is None:
        return [], None
    log = log_rows(r[NCOLS:] for r in rows if r[NCOLS] is not None)
    more = len(log) > limit
    del log[limit:]
    cursor = encode_cursor("b" if newest_first else "f", log[-1][0]) if more else None
    yield from refresh_on_read(tx, row)
    return decode_rows(key.session_id, log, cursor=cursor), cursor


def last_seq(tx: Tx, key: Key) -> Generator[Q, Any, int]:
    row, _ = yield from _lookup(tx, key)
    if row is None:
        return 0
    yield from refresh_on_read(tx, row)
    return row.last_seq


def info(tx: Tx, key: Key) -> Generator[Q, Any, SessionInfo | None]:
    row, _ = yield from _lookup(tx, key)
    if row is None:
        return None
    return info_of(key, (yield from refresh_on_read(tx, row)))


def load_state(tx: Tx, key: Key) -> Generator[Q, Any, tuple[dict[str, Any] | None, int]]:
    row, found = yield from _lookup(tx, key, ", s.state")
    if row is None:
        return None, 0
    yield from refresh_on_read(tx, row)
    text = found[NCOLS]
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


def get_counts(
    tx: Tx, key: Key, ids: list[str] | None
) -> Generator[Q, Any, dict[str, dict[str, int]]]:
    inner = f"SELECT message_id, counts FROM {tx.messages} WHERE session_pk = $pk"
    params: tuple[Any, ...] = ()
    if ids is not None:
        inner += " AND message_id = ANY (%s::text[])"
        params = ([db_id(i) for i in ids],)
    rows = yield from _with_log(tx, key, inner, params)
    row = visible(tx, key, rows[0] if rows else None)
    if row is None:
        return {}
    yield from refresh_on_read(tx, row)
    return {py_id(r[NCOLS]): decode_counts(r[NCOLS + 1]) for r in rows if r[NCOLS] is not None}


def tenant_counts(tx: Tx, user_id: str | None) -> Generator[Q, Any, dict[str | None, int]]:
    """Live sessions per tenant (None: no tenant), of ``user_id`` when given."""
    where = "(expires_at IS NULL OR expires_at > %s)"
    params: list[Any] = [tx.now]
    if user_id is not None:
        where += " AND user_id = %s"
        params.append(user_id)
    rows = yield Q.all(
        f"SELECT tenant, count(*) FROM {tx.sessions} WHERE {where} GROUP BY tenant",
        tuple(params),
    )
    return {(r[0] or None): int(r[1]) for r in rows}


def list_sessions(
    tx: Tx, tenant: str, user_id: str | None, before: int | None, limit: int
) -> Generator[Q, Any, tuple[list[SessionInfo], str | None]]:
    where = "s.tenant = %s AND (s.expires_at IS NULL OR s.expires_at > %s) AND s.pk < %s"
    params: list[Any] = [tenant, tx.now, (1 << 62) if before is None else before]
    if user_id is not None:
        where += " AND s.user_id = %s"
        params.append(user_id)
    rows = yield Q.all(
        f"SELECT s.session_id, {COLS} FROM {tx.sessions} s WHERE {where} "
        "ORDER BY s.pk DESC LIMIT %s",
        (*params, limit + 1),
    )
    more = len(rows) > limit
    del rows[limit:]
    out = [info_of(Key(tenant, r[0], None), Row(*r[1:])) for r in rows]
    return out, encode_cursor("s", rows[-1][1]) if more else None
