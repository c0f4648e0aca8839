"""Each public PostgreSQL call, checked and bound to its operation before any I/O.

A method of ``PostgresSession`` and of ``AsyncPostgresSession`` is the same builder here
(which validates every argument with ``records`` and raises before anything is sent)
handed to a different driver: the sync database drives the operation's generator with a
``psycopg`` connection, the async one with an async connection. So the twins cannot
drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .. import _check
from ..errors import ConfigError
from ..model import Message
from . import _pg_ops as ops
from . import _pg_writes as writes
from ._pg_ops import Key, Op, Q, Tx, in_tx
from ._sqlite_calls import check_session_key
from .base import check_limit
from .database import Counts, LogEntry, SessionInfo
from .records import (
    EncodedMessage,
    check_counts,
    check_expected,
    check_json_object,
    check_name,
    check_page_limit,
    decode_cursor,
    dumps,
    encode_messages,
)

__all__ = ["Call", "SessionCalls", "check_session_key"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """An operation ready to run: ``fn(tx)`` is its generator of statements."""

    fn: Callable[[Tx], Op]


def _write(body: Callable[[Tx], Op]) -> Call[Any]:
    return Call(lambda tx: in_tx(tx, body(tx)))


def _append_op(
    key: Key,
    batch: list[EncodedMessage],
    seq: int | None,
    state: str | None,
    has_state: bool,
    version: int | None,
    counts: dict[str, str],
) -> Callable[[Tx], Op]:
    def run(tx: Tx) -> Generator[Q, Any, int]:
        if batch:
            last = yield from writes.fast_append(
                tx, key, batch, seq, state, has_state, version, counts
            )
            if last >= 0:
                yield Q.committed()
                return last
        careful = writes.append(tx, key, batch, seq, state, has_state, version, counts)
        result: int = yield from in_tx(tx, careful)
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

    def _get_items(self, limit: object) -> Call[list[Message]]:
        key, n = self._key, check_limit(limit)
        return Call(lambda tx: ops.get_items(tx, key, n))

    def _entries(
        self, cursor: object, limit: object, newest_first: object
    ) -> Call[tuple[list[LogEntry], str | None]]:
        back = _check.flag("newest_first", newest_first)
        n = check_page_limit(limit)
        what = f"page()/entries() with newest_first={back}"
        position = decode_cursor(cursor, "b" if back else "f", what)
        key = self._key
        return Call(lambda tx: ops.entries(tx, key, position, n, back))

    def _last_seq(self) -> Call[int]:
        key = self._key
        return Call(lambda tx: ops.last_seq(tx, key))

    def _info(self) -> Call[SessionInfo | None]:
        key = self._key
        return Call(lambda tx: ops.info(tx, key))

    def _load_state(self) -> Call[tuple[dict[str, Any] | None, int]]:
        key = self._key
        return Call(lambda tx: ops.load_state(tx, key))

    def _get_counts(self, message_ids: object) -> Call[dict[str, dict[str, int]]]:
        ids: list[str] | None = None
        if message_ids is not None:
            if isinstance(message_ids, str | bytes) or not isinstance(message_ids, Sequence):
                raise ConfigError(f"message_ids={message_ids!r}: must be a list of ids or None")
            ids = list(message_ids)
            for i, mid in enumerate(ids):
                if not isinstance(mid, str):
                    raise ConfigError(f"message_ids[{i}]={mid!r}: must be a string")
        key = self._key
        return Call(lambda tx: ops.get_counts(tx, key, ids))

    def _append(
        self,
        messages: object,
        expected_seq: object,
        state: Mapping[str, Any] | None,
        expected_version: object,
        counts: Counts | None,
    ) -> Call[int]:
        batch = encode_messages(messages)
        seq = check_expected("expected_seq", expected_seq)
        version = check_expected("expected_version", expected_version)
        has_state = state is not None
        text = check_json_object("state", state) if has_state else None
        if has_state and version is None:
            raise ConfigError(
                "expected_version=None: required with state= (saving state is a "
                "compare-and-set; load_state() gives the current version)"
            )
        given = {} if counts is None else check_counts(counts)
        ids = {m.id for m in batch}
        for mid in given:
            if mid not in ids:
                raise ConfigError(
                    f"counts[{mid!r}]: not a message of this batch (set_counts stores "
                    "counts of messages already stored)"
                )
        texts = {mid: dumps(c) for mid, c in given.items()}
        return Call(_append_op(self._key, batch, seq, text, has_state, version, texts))

    def _pop_item(self) -> Call[Message | None]:
        key = self._key
        return _write(lambda tx: writes.pop_item(tx, key))

    def _clear_session(self) -> Call[None]:
        key = self._key
        return _write(lambda tx: writes.clear_session(tx, key))

    def _truncate(self, keep: object) -> Call[None]:
        key, n = self._key, _check.non_negative_int("keep", keep)
        return _write(lambda tx: writes.truncate(tx, key, n))

    def _save_state(self, state: Mapping[str, Any] | None, expected_version: object) -> Call[int]:
        text = None if state is None else check_json_object("state", state)
        version = _check.non_negative_int("expected_version", expected_version)
        key = self._key
        return _write(lambda tx: writes.save_state(tx, key, text, version))

    def _set_counts(self, counts: object) -> Call[None]:
        given = check_counts(counts)
        key = self._key
        return _write(lambda tx: writes.set_counts(tx, key, given))

    def _set_metadata(self, metadata: object) -> Call[None]:
        text = check_json_object("metadata", metadata)
        key = self._key
        return _write(lambda tx: writes.set_metadata(tx, key, text))


def sessions_call(
    user_id: object, tenant: object, cursor: object, limit: object
) -> Call[tuple[list[SessionInfo], str | None]]:
    uid = check_name("user_id", user_id, optional=True)
    ten = check_name("tenant", tenant, optional=True) or ""
    before = decode_cursor(cursor, "s", "sessions()")
    n = check_page_limit(limit)
    return Call(lambda tx: ops.list_sessions(tx, ten, uid, before, n))


def tenant_counts_call(user_id: object) -> Call[dict[str | None, int]]:
    uid = check_name("user_id", user_id, optional=True)
    return Call(lambda tx: ops.tenant_counts(tx, uid))


def delete_session_call(session_id: object, user_id: object, tenant: object) -> Call[bool]:
    key = check_session_key(session_id, user_id, tenant)
    return _write(lambda tx: writes.delete_session(tx, key))


def erase_user_call(user_id: object, tenant: object) -> Call[int]:
    uid = check_name("user_id", user_id)
    ten = check_name("tenant", tenant, optional=True) or ""
    assert uid is not None
    return _write(lambda tx: writes.erase_user(tx, ten, uid))


def sweep_call() -> Call[int]:
    return _write(writes.sweep)
