"""The SQLite writes: each runs inside ``BEGIN IMMEDIATE`` ... ``COMMIT`` opened by the
driver, so when one raises, the driver rolls back and nothing was written."""

from __future__ import annotations

import json
from typing import Any, Final

from ..errors import ConcurrentUpdate, ConfigError, MessageConflict, SessionOwnerMismatch
from ..model import Message
from ._sqlite_ops import COLS, MSG_NO_COUNTS, Key, Row, Tx, alive, chunks
from .records import EncodedMessage, decode_counts, decode_rows, dumps


def _lookup_for_write(tx: Tx, key: Key, *, create: bool) -> Row | None:
    """``lookup`` inside a write: an expired session is deleted first (a write starts a
    fresh one), and a missing one is created when ``create``."""
    found = tx.conn.one(
        f"SELECT {COLS} FROM convomem_sessions WHERE tenant = ? AND session_id = ?",
        (key.tenant, key.session_id),
    )
    if found is not None and not alive(tx, Row(*found)):
        tx.conn.run("DELETE FROM convomem_sessions WHERE pk = ?", (found[0],))
        found = None
    if found is None:
        if not create:
            return None
        expires = tx.ttl.expires_at(tx.now)
        cur = tx.conn.run(
            "INSERT INTO convomem_sessions (tenant, session_id, user_id, created_at, "
            "updated_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
            (key.tenant, key.session_id, key.user_id, tx.now, tx.now, expires),
        )
        assert cur.lastrowid is not None
        return Row(cur.lastrowid, key.user_id, tx.now, tx.now, expires, "{}", 1, 0, 0, 0)
    row = Row(*found)
    if key.user_id is not None and row.user_id != key.user_id:
        raise SessionOwnerMismatch(key.session_id, key.tenant_or_none, key.user_id)
    return row


def _touch(tx: Tx, row: Row) -> tuple[float, float | None]:
    """``updated_at`` and ``expires_at`` after a write."""
    return tx.now, tx.ttl.expires_at(tx.now) if tx.ttl.on_write else row.expires_at


def _by_id(tx: Tx, pk: int, ids: list[str], column: str) -> dict[str, tuple[int, Any]]:
    """``{message_id: (seq, column)}`` of the ids the session stores."""
    out: dict[str, tuple[int, Any]] = {}
    for part in chunks(ids):
        marks = ",".join("?" * len(part))
        for seq, mid, value in tx.conn.all(
            f"SELECT seq, message_id, CAST({column} AS BLOB) FROM convomem_messages "
            f"WHERE session_pk = ? AND message_id IN ({marks})",
            (pk, *part),
        ):
            out[mid] = (seq, value)
    return out


def _same(stored: bytes, new: EncodedMessage) -> bool:
    try:
        text = stored.decode("utf-8")
        # The same message may be written with its metadata's keys in another order.
        return text == new.data or bool(Message.from_dict(json.loads(text)) == new.message)
    except Exception:  # unreadable: not the same
        return False


def _check_replay(
    key: Key, batch: list[EncodedMessage], stored: dict[str, tuple[int, bytes]]
) -> list[EncodedMessage]:
    """The messages of ``batch`` that are new; raises ``MessageConflict`` for a stored id
    with other content, or a stored message after a new one (the batch would be split)."""
    new: list[EncodedMessage] = []
    for m in batch:
        hit = stored.get(m.id)
        if hit is None:
            new.append(m)
            continue
        if not _same(hit[1], m):
            raise MessageConflict(key.session_id, m.id, hit[0], "is stored with other content")
        if new:
            raise MessageConflict(
                key.session_id,
                m.id,
                hit[0],
                f"is already stored, after {new[0].id!r} of this batch which is not: "
                "a re-sent batch must be sent again whole, in its order",
            )
    return new


_INSERT: Final = (
    "INSERT INTO convomem_messages (session_pk, seq, message_id, data, counts) "
    "VALUES (?, ?, ?, ?, ?)"
)
_INSERT_NEW: Final = _INSERT + " ON CONFLICT (session_pk, message_id) DO NOTHING"
_AFTER_APPEND: Final = (
    "UPDATE convomem_sessions SET next_seq = ?, last_seq = ?, "
    "message_count = message_count + ?, updated_at = ?, expires_at = ?"
)
_AFTER_APPEND_STATE: Final = _AFTER_APPEND + ", state = ?, state_version = state_version + 1"


def _insert(
    tx: Tx, sql: str, pk: int, start: int, batch: list[EncodedMessage], counts: dict[str, str]
) -> int:
    """Insert ``batch`` at seqs ``start``...; how many rows went in."""
    if len(batch) == 1:  # execute is cheaper than executemany for the common single message
        m = batch[0]
        tx.conn.counts[0] += 1
        return tx.conn.raw.execute(sql, (pk, start, m.id, m.data, counts.get(m.id))).rowcount
    rows = [(pk, start + i, m.id, m.data, counts.get(m.id)) for i, m in enumerate(batch)]
    return tx.conn.many(sql, rows)


# The fast append: one UPDATE claims the seqs of a live session this handle may write, as
# the handle last saw it (pk and next_seq: pks are never reused and next_seq only grows, so
# a stale view matches no row), whose seq and state version are as expected. ?1 the
# next_seq seen, ?2 the batch's size, ?3 the time, ?4 the pk, ?5 the user (NULL: any), ?6
# the expected seq, ?7 the expected state version (NULL: any), ?8 the new expiry, ?9 the
# state. (No RETURNING: SQLite buffers its rows in a temporary table, which costs more
# than the rest of the statement.)
_CLAIM: Final = (
    "UPDATE convomem_sessions SET next_seq = ?1 + ?2, last_seq = ?1 + ?2 - 1, "
    "message_count = message_count + ?2, updated_at = ?3{set} "
    "WHERE pk = ?4 AND next_seq = ?1 AND (expires_at IS NULL OR expires_at > ?3) "
    "AND (?5 IS NULL OR user_id = ?5) AND (?6 IS NULL OR last_seq = ?6) "
    "AND (?7 IS NULL OR state_version = ?7)"
)
_CLAIMS: Final = {
    (False, False): _CLAIM.format(set=""),
    (False, True): _CLAIM.format(set=", expires_at = ?8"),
    (True, False): _CLAIM.format(set=", state = ?9, state_version = state_version + 1"),
    (True, True): _CLAIM.format(
        set=", expires_at = ?8, state = ?9, state_version = state_version + 1"
    ),
}


def _append_fast(
    tx: Tx,
    key: Key,
    batch: list[EncodedMessage],
    expected_seq: int | None,
    state: str | None,
    has_state: bool,
    expected_version: int | None,
    counts: dict[str, str],
    hint: list[int],
) -> int | None:
    """The common append in two statements (claim the seqs, insert the rows): the
    session as ``hint`` saw it (``[pk, next_seq]``), live, expectations met, every
    message new. None when it is not that case; then nothing was written (the
    transaction is rolled back and begun again if a row had to be undone)."""
    pk, start = hint
    if not pk:
        return None
    n = len(batch)
    on_write = tx.ttl.on_write
    params: tuple[Any, ...] = (
        start,
        n,
        tx.now,
        pk,
        key.user_id,
        expected_seq,
        expected_version,
    )
    if has_state:
        params += (tx.ttl.expires_at(tx.now), state)
    elif on_write:
        params += (tx.ttl.expires_at(tx.now),)
    conn = tx.conn
    conn.counts[0] += 1
    if not conn.raw.execute(_CLAIMS[has_state, on_write], params).rowcount:
        return None  # nothing was changed: the careful path decides
    if _insert(tx, _INSERT_NEW, pk, start, batch, counts) == n:
        hint[1] = start + n
        return start + n - 1
    # A re-sent id: undo the claim and the rows inserted, then take the careful path.
    tx.conn.run("ROLLBACK")
    tx.conn.run("BEGIN IMMEDIATE")
    return None


def append(
    tx: Tx,
    key: Key,
    batch: list[EncodedMessage],
    expected_seq: int | None,
    state: str | None,
    has_state: bool,
    expected_version: int | None,
    counts: dict[str, str],
    hint: list[int],
) -> int:
    """Append ``batch`` (and ``state``); the seq of the batch's last message. ``hint``:
    ``[pk, next_seq]`` of the session as the handle last saw it (0: unknown), kept
    up to date here."""
    if batch:
        done = _append_fast(
            tx, key, batch, expected_seq, state, has_state, expected_version, counts, hint
        )
        if done is not None:
            return done
    row = _lookup_for_write(tx, key, create=bool(batch) or has_state)
    hint[:] = (0, 0) if row is None else (row.pk, row.next_seq)
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
    new, start = batch, row.next_seq
    inserted = False
    if seq_ok and version_ok and batch:
        # The common case, every message new: insert at once and let the unique index
        # find a re-sent id; then undo and take the careful path below.
        n = _insert(tx, _INSERT_NEW, row.pk, start, batch, counts)
        inserted = n == len(batch)
        if not inserted and n:
            tx.conn.run(
                "DELETE FROM convomem_messages WHERE session_pk = ? AND seq >= ?", (row.pk, start)
            )
    if not inserted:
        stored = _by_id(tx, row.pk, [m.id for m in batch], "data")
        new = _check_replay(key, batch, stored)
        same_state = not has_state or (
            tx.conn.one("SELECT state FROM convomem_sessions WHERE pk = ?", (row.pk,))[0] == state
        )
        if not new and same_state:
            return stored[batch[-1].id][0] if batch else last  # a replay: nothing to do
        if not seq_ok:
            raise ConcurrentUpdate(key.session_id, "seq", expected_seq or 0, last)
        if not version_ok:
            raise ConcurrentUpdate(key.session_id, "state_version", expected_version or 0, version)
        if new:
            _insert(tx, _INSERT, row.pk, start, new, counts)
    updated, expires = _touch(tx, row)
    new_last = start + len(new) - 1 if new else last
    hint[1] = start + len(new)
    params = (start + len(new), new_last, len(new), updated, expires)
    if has_state:
        tx.conn.run(_AFTER_APPEND_STATE + " WHERE pk = ?", (*params, state, row.pk))
    else:
        tx.conn.run(_AFTER_APPEND + " WHERE pk = ?", (*params, row.pk))
    return new_last


def _set_tail(tx: Tx, row: Row, removed: int, extra: str = "") -> None:
    """After messages were removed from the tail: the new newest seq and the count."""
    newest = tx.conn.one(
        "SELECT seq FROM convomem_messages WHERE session_pk = ? ORDER BY seq DESC LIMIT 1",
        (row.pk,),
    )
    updated, expires = _touch(tx, row)
    tx.conn.run(
        "UPDATE convomem_sessions SET last_seq = ?, message_count = message_count - ?, "
        f"updated_at = ?, expires_at = ?{extra} WHERE pk = ?",
        (0 if newest is None else newest[0], removed, updated, expires, row.pk),
    )


def pop_item(tx: Tx, key: Key) -> Message | None:
    row = _lookup_for_write(tx, key, create=False)
    if row is None:
        return None
    newest = tx.conn.one(MSG_NO_COUNTS + " ORDER BY seq DESC LIMIT 1", (row.pk,))
    if newest is None:
        return None
    message = decode_rows(key.session_id, [newest])[0].message
    tx.conn.run(
        "DELETE FROM convomem_messages WHERE session_pk = ? AND seq = ?", (row.pk, newest[0])
    )
    _set_tail(tx, row, 1)
    return message


def truncate(tx: Tx, key: Key, keep: int) -> None:
    row = _lookup_for_write(tx, key, create=False)
    if row is None or keep >= row.message_count:
        return
    cut = 0
    if keep:
        cut = tx.conn.one(
            "SELECT seq FROM convomem_messages WHERE session_pk = ? ORDER BY seq LIMIT 1 OFFSET ?",
            (row.pk, keep - 1),
        )[0]
    n = tx.conn.run(
        "DELETE FROM convomem_messages WHERE session_pk = ? AND seq > ?", (row.pk, cut)
    ).rowcount
    _set_tail(tx, row, n)


def clear_session(tx: Tx, key: Key) -> None:
    row = _lookup_for_write(tx, key, create=False)
    if row is None:
        return
    n = tx.conn.run("DELETE FROM convomem_messages WHERE session_pk = ?", (row.pk,)).rowcount
    # The derived state described the log: it goes with it (a new version, so a writer
    # holding the old one cannot put it back).
    _set_tail(tx, row, n, ", state_version = state_version + (state IS NOT NULL), state = NULL")


def save_state(tx: Tx, key: Key, state: str | None, expected_version: int) -> int:
    row = _lookup_for_write(tx, key, create=True)
    assert row is not None
    if row.state_version != expected_version:
        raise ConcurrentUpdate(key.session_id, "state_version", expected_version, row.state_version)
    updated, expires = _touch(tx, row)
    tx.conn.run(
        "UPDATE convomem_sessions SET state = ?, state_version = state_version + 1, "
        "updated_at = ?, expires_at = ? WHERE pk = ?",
        (state, updated, expires, row.pk),
    )
    return row.state_version + 1


def set_counts(tx: Tx, key: Key, counts: dict[str, dict[str, int]]) -> None:
    """Merge counts into the stored ones (other tokenizers' counts are kept)."""
    row = _lookup_for_write(tx, key, create=False)
    ids = list(counts)
    have = {} if row is None else _by_id(tx, row.pk, ids, "counts")
    for mid in ids:
        if mid not in have:
            raise ConfigError(f"counts[{mid!r}]: session {key.session_id!r} has no such message")
    if row is not None and ids:
        tx.conn.many(
            "UPDATE convomem_messages SET counts = ? WHERE session_pk = ? AND message_id = ?",
            [(dumps(decode_counts(have[mid][1]) | counts[mid]), row.pk, mid) for mid in ids],
        )


def set_metadata(tx: Tx, key: Key, metadata: str) -> None:
    row = _lookup_for_write(tx, key, create=True)
    assert row is not None
    updated, expires = _touch(tx, row)
    tx.conn.run(
        "UPDATE convomem_sessions SET metadata = ?, updated_at = ?, expires_at = ? WHERE pk = ?",
        (metadata, updated, expires, row.pk),
    )


# -- the database -----------------------------------------------------------------------


def delete_session(tx: Tx, key: Key) -> bool:
    found = tx.conn.one(
        "SELECT pk, user_id, expires_at FROM convomem_sessions WHERE tenant = ? AND session_id = ?",
        (key.tenant, key.session_id),
    )
    if found is None:
        return False
    pk, owner, expires_at = found
    visible = expires_at is None or expires_at > tx.now
    if visible and key.user_id is not None and owner != key.user_id:
        raise SessionOwnerMismatch(key.session_id, key.tenant_or_none, key.user_id)
    tx.conn.run("DELETE FROM convomem_sessions WHERE pk = ?", (pk,))
    return visible


def erase_user(tx: Tx, tenant: str, user_id: str) -> int:
    return tx.conn.run(
        "DELETE FROM convomem_sessions WHERE tenant = ? AND user_id = ?", (tenant, user_id)
    ).rowcount


def sweep(tx: Tx) -> int:
    return tx.conn.run(
        "DELETE FROM convomem_sessions WHERE expires_at IS NOT NULL AND expires_at <= ?",
        (tx.now,),
    ).rowcount
