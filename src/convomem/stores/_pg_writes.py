"""The PostgreSQL writes, sans I/O. Each but ``append`` runs inside a transaction the
driver opens and commits; ``append`` first tries the one-statement function
``convomem_append`` (in autocommit: the common case costs one round trip) and opens its
own transaction for the careful path when that function declines (a re-sent id, a
missed expectation, an expired session, a state-only write).

Every write locks the session's row first (``SELECT ... FOR UPDATE``), so writers of one
session queue on it and the seq, the compare-and-sets and the replay checks are decided
on the newest committed state.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

from ..errors import ConcurrentUpdate, ConfigError, SessionOwnerMismatch, TransientError
from ..model import Message
from ._pg_ops import COLS, WHERE_KEY, Key, Q, Row, Tx, alive, db_id, log_rows, py_id
from ._sqlite_writes import _check_replay
from .records import EncodedMessage, decode_counts, decode_rows, dumps


def _lookup_for_write(tx: Tx, key: Key, *, create: bool) -> Generator[Q, Any, Row | None]:
    """The session's row, locked; an expired one is deleted first (a write starts a fresh
    session), and a missing one is created when ``create``."""
    for _ in range(3):
        found = yield Q.one(
            f"SELECT {COLS} FROM {tx.sessions} s WHERE {WHERE_KEY} FOR UPDATE",
            (key.tenant, key.session_id),
        )
        if found is not None and not alive(tx, Row(*found)):
            yield Q.run(f"DELETE FROM {tx.sessions} WHERE pk = %s", (found[0],))
            found = None
        if found is None:
            if not create:
                return None
            expires = tx.ttl.expires_at(tx.now)
            found = yield Q.one(
                f"INSERT INTO {tx.sessions} AS s (tenant, session_id, user_id, created_at, "
                "updated_at, expires_at) VALUES (%s, %s, %s, %s, %s, %s) "
                f"ON CONFLICT (tenant, session_id) DO NOTHING RETURNING {COLS}",
                (key.tenant, key.session_id, key.user_id, tx.now, tx.now, expires),
            )
            if found is None:  # created by another writer since: lock that one
                continue
        row = Row(*found)
        if key.user_id is not None and row.user_id != key.user_id:
            raise SessionOwnerMismatch(key.session_id, key.tenant_or_none, key.user_id)
        return row
    raise TransientError(f"session {key.session_id!r}: created and deleted by others meanwhile")


def _touch(tx: Tx, row: Row) -> tuple[float, float | None]:
    """``updated_at`` and ``expires_at`` after a write."""
    return tx.now, tx.ttl.expires_at(tx.now) if tx.ttl.on_write else row.expires_at


def _by_id(
    tx: Tx, pk: int, ids: list[str], column: str
) -> Generator[Q, Any, dict[str, tuple[int, Any]]]:
    """``{message_id: (seq, column)}`` of the ids the session stores."""
    rows = yield Q.all(
        f"SELECT seq, message_id, {column} FROM {tx.messages} "
        "WHERE session_pk = %s AND message_id = ANY (%s::text[])",
        (pk, [db_id(i) for i in ids]),
    )
    return {py_id(mid): (seq, value) for seq, mid, value in rows}


def _insert(tx: Tx, pk: int, start: int, batch: list[EncodedMessage], counts: dict[str, str]) -> Q:
    return Q.run(
        f"INSERT INTO {tx.messages} (session_pk, seq, message_id, data, counts) "
        "SELECT %s, %s + b.o - 1, b.i, b.d, b.c "
        "FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS b (i, d, c, o)",
        (
            pk,
            start,
            [db_id(m.id) for m in batch],
            [m.data for m in batch],
            [counts.get(m.id) for m in batch],
        ),
    )


def _literal(value: object) -> str | None:
    """SQL text for a value that cannot carry an injection (None, a bool, an int, a
    finite float); None for anything else (sent as a parameter)."""
    if value is None:
        return "NULL"
    if value is True or value is False:
        return "TRUE" if value else "FALSE"
    if type(value) is int:
        return str(value)
    if type(value) is float and math.isfinite(value):
        return repr(value)
    return None


def fast_append(
    tx: Tx,
    key: Key,
    batch: list[EncodedMessage],
    expected_seq: int | None,
    state: str | None,
    has_state: bool,
    expected_version: int | None,
    counts: dict[str, str],
) -> Generator[Q, Any, int]:
    """The whole append as one call of ``convomem_append``; -1 when it declined (or a
    message id is stored already: the unique index refused it and nothing changed)."""
    if len(batch) == 1:
        m = batch[0]
        name, kind = "convomem_append_one", "text"
        ids: Any = db_id(m.id)
        data: Any = m.data
        texts: Any = counts.get(m.id)
    else:
        name, kind = "convomem_append", "text[]"
        ids = [db_id(m.id) for m in batch]
        data = [m.data for m in batch]
        texts = [counts.get(m.id) for m in batch]
    # Numbers, flags and NULLs we made ourselves go in as literals: each parameter costs
    # psycopg and the server more than the text (a one-message append sends 4, not 14).
    args = [
        key.tenant,
        key.session_id,
        key.user_id,
        tx.now,
        tx.ttl.expires_at(tx.now),
        tx.ttl.on_write,
        str(tx.lock_ms),
        ids,
        data,
        texts,
        expected_seq,
        has_state,
        state,
        expected_version,
    ]
    kinds = ["text", "text", "text", "float8", "float8", "boolean", "text"]
    kinds += [kind, kind, kind, "bigint", "boolean", "text", "bigint"]
    sql: list[str] = []
    params: list[Any] = []
    for value, cast in zip(args, kinds, strict=True):
        literal = _literal(value)
        if literal is None:
            sql.append(f"%s::{cast}")
            params.append(value)
        else:
            sql.append(f"{literal}::{cast}")
    got = yield Q.one_or_conflict(f"SELECT {tx.schema}.{name}({', '.join(sql)})", params)
    result: int = -1 if got is None else got[0]
    return result


def append(
    tx: Tx,
    key: Key,
    batch: list[EncodedMessage],
    expected_seq: int | None,
    state: str | None,
    has_state: bool,
    expected_version: int | None,
    counts: dict[str, str],
) -> Generator[Q, Any, int]:
    """Append ``batch`` (and ``state``) on the careful path, inside a transaction; the
    seq of the batch's last message (the same decisions as SQLite's ``append``)."""
    row = yield from _lookup_for_write(tx, key, create=bool(batch) or has_state)
    last = 0 if row is None else row.last_seq
    version = 0 if row is None else row.state_version
    seq_ok = expected_seq is None or expected_seq == last
    version_ok = expected_version is None or expected_version == version
    if row is None or (not batch and not has_state):
        if not seq_ok:
            raise ConcurrentUpdate(key.session_id, "seq", expected_seq or 0, last)
        if not version_ok:
            raise ConcurrentUpdate(key.session_id, "state_version", expected_version or 0, version)
        return last
    stored = yield from _by_id(tx, row.pk, [m.id for m in batch], "data")
    new = _check_replay(key, batch, {k: (s, d.encode()) for k, (s, d) in stored.items()})
    same_state = True
    if has_state:
        current = yield Q.one(f"SELECT state FROM {tx.sessions} WHERE pk = %s", (row.pk,))
        same_state = current[0] == state
    if not new and same_state:
        return stored[batch[-1].id][0] if batch else last  # a replay: nothing to do
    if not seq_ok:
        raise ConcurrentUpdate(key.session_id, "seq", expected_seq or 0, last)
    if not version_ok:
        raise ConcurrentUpdate(key.session_id, "state_version", expected_version or 0, version)
    start = row.next_seq
    if new:
        yield _insert(tx, row.pk, start, new, counts)
    updated, expires = _touch(tx, row)
    new_last = start + len(new) - 1 if new else last
    sql = (
        f"UPDATE {tx.sessions} SET next_seq = %s, last_seq = %s, "
        "message_count = message_count + %s, updated_at = %s, expires_at = %s"
    )
    params: tuple[Any, ...] = (start + len(new), new_last, len(new), updated, expires)
    if has_state:
        sql += ", state = %s, state_version = state_version + 1"
        params += (state,)
    yield Q.run(sql + " WHERE pk = %s", (*params, row.pk))
    return new_last


def _set_tail(tx: Tx, row: Row, removed: int, extra: str = "") -> Generator[Q, Any, None]:
    """After messages were removed from the tail: the new newest seq and the count."""
    updated, expires = _touch(tx, row)
    yield Q.run(
        f"UPDATE {tx.sessions} SET last_seq = coalesce((SELECT max(seq) FROM {tx.messages} "
        "WHERE session_pk = %s), 0), message_count = message_count - %s, "
        f"updated_at = %s, expires_at = %s{extra} WHERE pk = %s",
        (row.pk, removed, updated, expires, row.pk),
    )


def pop_item(tx: Tx, key: Key) -> Generator[Q, Any, Message | None]:
    row = yield from _lookup_for_write(tx, key, create=False)
    if row is None:
        return None
    newest = yield Q.one(
        f"SELECT seq, message_id, data, NULL FROM {tx.messages} WHERE session_pk = %s "
        "ORDER BY seq DESC LIMIT 1",
        (row.pk,),
    )
    if newest is None:
        return None
    message = decode_rows(key.session_id, log_rows([newest]))[0].message
    yield Q.run(
        f"DELETE FROM {tx.messages} WHERE session_pk = %s AND seq = %s", (row.pk, newest[0])
    )
    yield from _set_tail(tx, row, 1)
    return message


def truncate(tx: Tx, key: Key, keep: int) -> Generator[Q, Any, None]:
    row = yield from _lookup_for_write(tx, key, create=False)
    if row is None or keep >= row.message_count:
        return
    cut = 0
    if keep:
        found = yield Q.one(
            f"SELECT seq FROM {tx.messages} WHERE session_pk = %s ORDER BY seq LIMIT 1 OFFSET %s",
            (row.pk, keep - 1),
        )
        cut = found[0]
    n = yield Q.run(f"DELETE FROM {tx.messages} WHERE session_pk = %s AND seq > %s", (row.pk, cut))
    yield from _set_tail(tx, row, n)


def clear_session(tx: Tx, key: Key) -> Generator[Q, Any, None]:
    row = yield from _lookup_for_write(tx, key, create=False)
    if row is None:
        return
    n = yield Q.run(f"DELETE FROM {tx.messages} WHERE session_pk = %s", (row.pk,))
    # The derived state described the log: it goes with it (a new version, so a writer
    # holding the old one cannot put it back).
    yield from _set_tail(
        tx,
        row,
        n,
        ", state_version = state_version + (state IS NOT NULL)::int, state = NULL",
    )


def save_state(
    tx: Tx, key: Key, state: str | None, expected_version: int
) -> Generator[Q, Any, int]:
    row = yield from _lookup_for_write(tx, key, create=True)
    assert row is not None
    if row.state_version != expected_version:
        raise ConcurrentUpdate(key.session_id, "state_version", expected_version, row.state_version)
    updated, expires = _touch(tx, row)
    yield Q.run(
        f"UPDATE {tx.sessions} SET state = %s, state_version = state_version + 1, "
        "updated_at = %s, expires_at = %s WHERE pk = %s",
        (state, updated, expires, row.pk),
    )
    return row.state_version + 1


def set_counts(tx: Tx, key: Key, counts: dict[str, dict[str, int]]) -> Generator[Q, Any, None]:
    """Merge counts into the stored ones (other tokenizers' counts are kept)."""
    row = yield from _lookup_for_write(tx, key, create=False)
    ids = list(counts)
    have = {} if row is None else (yield from _by_id(tx, row.pk, ids, "counts"))
    for mid in ids:
        if mid not in have:
            raise ConfigError(f"counts[{mid!r}]: session {key.session_id!r} has no such message")
    if row is not None and ids:
        merged = [dumps(decode_counts(have[mid][1]) | counts[mid]) for mid in ids]
        yield Q.run(
            f"UPDATE {tx.messages} m SET counts = u.c "
            "FROM unnest(%s::text[], %s::text[]) AS u (i, c) "
            "WHERE m.session_pk = %s AND m.message_id = u.i",
            ([db_id(i) for i in ids], merged, row.pk),
        )


def set_metadata(tx: Tx, key: Key, metadata: str) -> Generator[Q, Any, None]:
    row = yield from _lookup_for_write(tx, key, create=True)
    assert row is not None
    updated, expires = _touch(tx, row)
    yield Q.run(
        f"UPDATE {tx.sessions} SET metadata = %s, updated_at = %s, expires_at = %s WHERE pk = %s",
        (metadata, updated, expires, row.pk),
    )


# -- the database -----------------------------------------------------------------------


def delete_session(tx: Tx, key: Key) -> Generator[Q, Any, bool]:
    found = yield Q.one(
        f"SELECT pk, user_id, expires_at FROM {tx.sessions} s WHERE {WHERE_KEY} FOR UPDATE",
        (key.tenant, key.session_id),
    )
    if found is None:
        return False
    pk, owner, expires_at = found
    shown = expires_at is None or expires_at > tx.now
    if shown and key.user_id is not None and owner != key.user_id:
        raise SessionOwnerMismatch(key.session_id, key.tenant_or_none, key.user_id)
    yield Q.run(f"DELETE FROM {tx.sessions} WHERE pk = %s", (pk,))
    return shown


def erase_user(tx: Tx, tenant: str, user_id: str) -> Generator[Q, Any, int]:
    n: int = yield Q.run(
        f"DELETE FROM {tx.sessions} WHERE tenant = %s AND user_id = %s", (tenant, user_id)
    )
    return n


def sweep(tx: Tx) -> Generator[Q, Any, int]:
    n: int = yield Q.run(
        f"DELETE FROM {tx.sessions} WHERE expires_at IS NOT NULL AND expires_at <= %s",
        (tx.now,),
    )
    return n
