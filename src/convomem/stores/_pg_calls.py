"""Each public PostgreSQL call, checked and bound to its operation before any I/O.

A method of ``PostgresSession`` and of ``AsyncPostgresSession`` is the same builder here
(which validates every argument with ``records`` and raises before anything is sent)
handed to a different driver: the sync database drives the operation's generator with a
``psycopg`` connection, the async one with an async connection. So the twins cannot
drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .. import _check
from ..model import Message
from . import _pg_ops as ops
from . import _pg_writes as writes
from ._calls import (
    Append,
    check_append,
    check_listing,
    check_message_ids,
    check_owner,
    check_session_key,
)
from ._pg_ops import Key, Op, Q, Tx, in_tx
from .base import check_limit
from .database import Counts, LogEntry, SessionInfo
from .records import (
    EncodedMessage,
    check_counts,
    check_json_object,
    check_name,
    check_page_limit,
    decode_cursor,
    encode_messages,
)

__all__ = ["DatabaseCalls", "PgCall", "SessionCalls", "check_session_key"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PgCall(Generic[T]):
    """An operation ready to run: ``fn(tx)`` is its generator of statements."""

    fn: Callable[[Tx], Op]


def _write(body: Callable[[Tx], Op]) -> PgCall[Any]:
    return PgCall(lambda tx: in_tx(tx, body(tx)))


def _append_op(key: Key, batch: list[EncodedMessage], a: Append) -> Callable[[Tx], Op]:
    args = (a.expected_seq, a.state, a.has_state, a.expected_version, a.counts)

    def run(tx: Tx) -> Generator[Q, Any, int]:
        if batch:
            last = yield from writes.fast_append(tx, key, batch, *args)
            if last >= 0:
                yield Q.committed()
                return last
        result: int = yield from in_tx(tx, writes.append(tx, key, batch, *args))
        return result

    return run


class SessionCalls:
    """The calls of one session handle; the sync and async sessions derive from it."""

    __slots__ = ("_key", "session_id", "tenant", "user_id")

    def __init__(self, key: Key) -> None:
        self._key = key
        self.session_id: str = key.session_id
        self.user_id: str | None = key.user_id
        self.tenant: str | None = key.tenant_or_none

    def _get_items(self, limit: object) -> PgCall[list[Message]]:
        key, n = self._key, check_limit(limit)
        return PgCall(lambda tx: ops.get_items(tx, key, n))

    def _entries(
        self, cursor: object, limit: object, newest_first: object
    ) -> PgCall[tuple[list[LogEntry], str | None]]:
        back = _check.flag("newest_first", newest_first)
        n = check_page_limit(limit)
        what = f"page()/entries() with newest_first={back}"
        position = decode_cursor(cursor, "b" if back else "f", what)
        key = self._key
        return PgCall(lambda tx: ops.entries(tx, key, position, n, back))

    def _last_seq(self) -> PgCall[int]:
        key = self._key
        return PgCall(lambda tx: ops.last_seq(tx, key))

    def _info(self) -> PgCall[SessionInfo | None]:
        key = self._key
        return PgCall(lambda tx: ops.info(tx, key))

    def _load_state(self) -> PgCall[tuple[dict[str, Any] | None, int]]:
        key = self._key
        return PgCall(lambda tx: ops.load_state(tx, key))

    def _get_counts(self, message_ids: object) -> PgCall[dict[str, dict[str, int]]]:
        ids = check_message_ids(message_ids)
        key = self._key
        return PgCall(lambda tx: ops.get_counts(tx, key, ids))

    def _append(
        self,
        messages: object,
        expected_seq: object,
        state: Mapping[str, Any] | None,
        expected_version: object,
        counts: Counts | None,
    ) -> PgCall[int]:
        batch = encode_messages(messages)
        a = check_append(batch, expected_seq, state, expected_version, counts)
        return PgCall(_append_op(self._key, batch, a))

    def _pop_item(self) -> PgCall[Message | None]:
        key = self._key
        return _write(lambda tx: writes.pop_item(tx, key))

    def _clear_session(self) -> PgCall[None]:
        key = self._key
        return _write(lambda tx: writes.clear_session(tx, key))

    def _truncate(self, keep: object) -> PgCall[None]:
        key, n = self._key, _check.non_negative_int("keep", keep)
        return _write(lambda tx: writes.truncate(tx, key, n))

    def _save_state(self, state: Mapping[str, Any] | None, expected_version: object) -> PgCall[int]:
        text = None if state is None else check_json_object("state", state)
        version = _check.non_negative_int("expected_version", expected_version)
        key = self._key
        return _write(lambda tx: writes.save_state(tx, key, text, version))

    def _set_counts(self, counts: object) -> PgCall[None]:
        given = check_counts(counts)
        key = self._key
        return _write(lambda tx: writes.set_counts(tx, key, given))

    def _set_metadata(self, metadata: object) -> PgCall[None]:
        text = check_json_object("metadata", metadata)
        key = self._key
        return _write(lambda tx: writes.set_metadata(tx, key, text))


class DatabaseCalls:
    """The calls of a database (``_database_api``); the sync and async databases derive
    from it."""

    __slots__ = ()

    def _sessions(
        self, user_id: object, tenant: object, cursor: object, limit: object
    ) -> PgCall[tuple[list[SessionInfo], str | None]]:
        a = check_listing(user_id, tenant, cursor, limit)
        return PgCall(lambda tx: ops.list_sessions(tx, a.tenant, a.user_id, a.before, a.limit))

    def _tenant_counts(self, user_id: object) -> PgCall[dict[str | None, int]]:
        uid = check_name("user_id", user_id, optional=True)
        return PgCall(lambda tx: ops.tenant_counts(tx, uid))

    def _delete_session(self, session_id: object, user_id: object, tenant: object) -> PgCall[bool]:
        key = check_session_key(session_id, user_id, tenant)
        return _write(lambda tx: writes.delete_session(tx, key))

    def _erase_user(self, user_id: object, tenant: object) -> PgCall[int]:
        ten, uid = check_owner(user_id, tenant)
        return _write(lambda tx: writes.erase_user(tx, ten, uid))

    def _sweep(self) -> PgCall[int]:
        return _write(writes.sweep)

    def _statements(self, op: Callable[[], Generator[Any, Any, T]], write: bool) -> PgCall[T]:
        """A caller's own operation of ``Q`` statements (in a transaction with ``write``)."""
        return PgCall(lambda tx: in_tx(tx, op()) if write else op())
