"""Each public SQLite call, checked and bound to its operation before any I/O.

A method of ``SQLiteSession`` and of ``AsyncSQLiteSession`` is the same builder here
(which validates every argument and raises before anything is read or written) handed to
a different driver: the sync database runs the ``Call`` on the calling thread, the async
one in a worker thread. So the twins cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any, Generic, TypeVar

from .. import _check, _io
from ..model import Message
from . import _sqlite_ops as ops
from . import _sqlite_writes as writes
from ._calls import (
    check_append,
    check_listing,
    check_message_ids,
    check_owner,
    check_session_key,
)
from .base import check_limit
from .database import Counts, LogEntry, SessionInfo
from .records import (
    EncodedMessage,
    check_counts,
    check_json_object,
    check_name,
    check_page_limit,
    decode_cursor,
    dumps,
    encode_messages,
)

__all__ = ["DatabaseCalls", "SQLiteCall", "SessionCalls", "check_session_key"]

T = TypeVar("T")


class SQLiteCall(Generic[T]):
    """An operation ready to run: ``fn(tx)``, inside a write transaction when ``write``."""

    __slots__ = ("fn", "write")

    def __init__(self, fn: Callable[[ops.Tx], T], write: bool) -> None:
        self.fn = fn
        self.write = write


def _encode(messages: object) -> list[EncodedMessage]:
    """``encode_messages``, with the common batch of one message (an agent's turn) done
    inline: the same result, without the generic checks a one-item list cannot fail."""
    if type(messages) is list and len(messages) == 1:
        m = messages[0]
        if type(m) is Message:
            try:
                return [EncodedMessage(m.id, dumps(m.to_dict()), m)]
            except (TypeError, ValueError):
                pass  # encode_messages raises the error that names it
    return encode_messages(messages)


class SessionCalls:
    """The calls of one session handle; the sync and async sessions derive from it."""

    __slots__ = ("_hint", "_key", "session_id", "tenant", "user_id")

    def __init__(self, key: ops.Key) -> None:
        self._key = key
        # [pk, next_seq] of the session as this handle last saw it (0: unknown): an append
        # claims its seqs with one UPDATE by rowid. A stale hint (another writer appended,
        # the session was deleted and made again) matches no row and sends that append
        # down the careful path, which refreshes it.
        self._hint = [0, 0]
        self.session_id: str = key.session_id
        self.user_id: str | None = key.user_id
        self.tenant: str | None = key.tenant_or_none

    def _get_items(self, limit: object) -> SQLiteCall[list[Message]]:
        key, n = self._key, check_limit(limit)
        return SQLiteCall(lambda tx: ops.get_items(tx, key, n), False)

    def _entries(
        self, cursor: object, limit: object, newest_first: object
    ) -> SQLiteCall[tuple[list[LogEntry], str | None]]:
        back = _check.flag("newest_first", newest_first)
        n = check_page_limit(limit)
        kind = "b" if back else "f"
        what = f"page()/entries() with newest_first={back}"
        position = decode_cursor(cursor, kind, what)
        key = self._key
        return SQLiteCall(lambda tx: ops.entries(tx, key, position, n, back), False)

    def _last_seq(self) -> SQLiteCall[int]:
        key = self._key
        return SQLiteCall(lambda tx: ops.last_seq(tx, key), False)

    def _info(self) -> SQLiteCall[SessionInfo | None]:
        key = self._key
        return SQLiteCall(lambda tx: ops.info(tx, key), False)

    def _load_state(self) -> SQLiteCall[tuple[dict[str, Any] | None, int]]:
        key = self._key
        return SQLiteCall(lambda tx: ops.load_state(tx, key), False)

    def _get_counts(self, message_ids: object) -> SQLiteCall[dict[str, dict[str, int]]]:
        ids = check_message_ids(message_ids)
        key = self._key
        return SQLiteCall(lambda tx: ops.get_counts(tx, key, ids), False)

    def _append(
        self,
        messages: object,
        expected_seq: object,
        state: Mapping[str, Any] | None,
        expected_version: object,
        counts: Counts | None,
    ) -> SQLiteCall[int]:
        batch = _encode(messages)
        a = check_append(batch, expected_seq, state, expected_version, counts)
        key, hint = self._key, self._hint
        return SQLiteCall(
            lambda tx: writes.append(
                tx,
                key,
                batch,
                a.expected_seq,
                a.state,
                a.has_state,
                a.expected_version,
                a.counts,
                hint,
            ),
            True,
        )

    def _pop_item(self) -> SQLiteCall[Message | None]:
        key = self._key
        return SQLiteCall(lambda tx: writes.pop_item(tx, key), True)

    def _clear_session(self) -> SQLiteCall[None]:
        key = self._key
        return SQLiteCall(lambda tx: writes.clear_session(tx, key), True)

    def _truncate(self, keep: object) -> SQLiteCall[None]:
        key, n = self._key, _check.non_negative_int("keep", keep)
        return SQLiteCall(lambda tx: writes.truncate(tx, key, n), True)

    def _save_state(
        self, state: Mapping[str, Any] | None, expected_version: object
    ) -> SQLiteCall[int]:
        text = None if state is None else check_json_object("state", state)
        version = _check.non_negative_int("expected_version", expected_version)
        key = self._key
        return SQLiteCall(lambda tx: writes.save_state(tx, key, text, version), True)

    def _set_counts(self, counts: object) -> SQLiteCall[None]:
        given = check_counts(counts)
        key = self._key
        return SQLiteCall(lambda tx: writes.set_counts(tx, key, given), True)

    def _set_metadata(self, metadata: object) -> SQLiteCall[None]:
        text = check_json_object("metadata", metadata)
        key = self._key
        return SQLiteCall(lambda tx: writes.set_metadata(tx, key, text), True)


class DatabaseCalls:
    """The calls of a database (``_database_api``); the sync and async databases derive
    from it."""

    __slots__ = ()

    def _sessions(
        self, user_id: object, tenant: object, cursor: object, limit: object
    ) -> SQLiteCall[tuple[list[SessionInfo], str | None]]:
        a = check_listing(user_id, tenant, cursor, limit)
        return SQLiteCall(
            lambda tx: ops.list_sessions(tx, a.tenant, a.user_id, a.before, a.limit), False
        )

    def _tenant_counts(self, user_id: object) -> SQLiteCall[dict[str | None, int]]:
        uid = check_name("user_id", user_id, optional=True)
        return SQLiteCall(lambda tx: ops.tenant_counts(tx, uid), False)

    def _delete_session(
        self, session_id: object, user_id: object, tenant: object
    ) -> SQLiteCall[bool]:
        key = check_session_key(session_id, user_id, tenant)
        return SQLiteCall(lambda tx: writes.delete_session(tx, key), True)

    def _erase_user(self, user_id: object, tenant: object) -> SQLiteCall[int]:
        ten, uid = check_owner(user_id, tenant)
        return SQLiteCall(lambda tx: writes.erase_user(tx, ten, uid), True)

    def _sweep(self) -> SQLiteCall[int]:
        return SQLiteCall(writes.sweep, True)

    def _statements(self, op: Callable[[], Generator[Any, Any, T]], write: bool) -> SQLiteCall[T]:
        """A caller's own operation of ``Q`` statements, run on the connection."""
        return SQLiteCall(lambda tx: _io.drive(op(), tx.conn.perform), write)
