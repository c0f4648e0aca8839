"""Each public SQLite call, checked and bound to its operation before any I/O.

A method of ``SQLiteSession`` and of ``AsyncSQLiteSession`` is the same builder here
(which validates every argument and raises before anything is read or written) handed to
a different driver: the sync database runs the ``Call`` on the calling thread, the async
one in a worker thread. So the twins cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from .. import _check
from ..errors import ConfigError
from ..model import Message
from . import _sqlite_ops as ops
from . import _sqlite_writes as writes
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

T = TypeVar("T")


class Call(Generic[T]):
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


def check_session_key(session_id: object, user_id: object, tenant: object) -> ops.Key:
    """The validated name of a session and the user a handle acts for."""
    sid = check_name("session_id", session_id)
    uid = check_name("user_id", user_id, optional=True)
    ten = check_name("tenant", tenant, optional=True)
    assert sid is not None
    return ops.Key(ten or "", sid, uid)


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

    def _get_items(self, limit: object) -> Call[list[Message]]:
        key, n = self._key, check_limit(limit)
        return Call(lambda tx: ops.get_items(tx, key, n), False)

    def _entries(
        self, cursor: object, limit: object, newest_first: object
    ) -> Call[tuple[list[LogEntry], str | None]]:
        back = _check.flag("newest_first", newest_first)
        n = check_page_limit(limit)
        kind = "b" if back else "f"
        what = f"page()/entries() with newest_first={back}"
        position = decode_cursor(cursor, kind, what)
        key = self._key
        return Call(lambda tx: ops.entries(tx, key, position, n, back), False)

    def _last_seq(self) -> Call[int]:
        key = self._key
        return Call(lambda tx: ops.last_seq(tx, key), False)

    def _info(self) -> Call[SessionInfo | None]:
        key = self._key
        return Call(lambda tx: ops.info(tx, key), False)

    def _load_state(self) -> Call[tuple[dict[str, Any] | None, int]]:
        key = self._key
        return Call(lambda tx: ops.load_state(tx, key), False)

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
        return Call(lambda tx: ops.get_counts(tx, key, ids), False)

    def _append(
        self,
        messages: object,
        expected_seq: object,
        state: Mapping[str, Any] | None,
        expected_version: object,
        counts: Counts | None,
    ) -> Call[int]:
        batch = _encode(messages)
        seq = check_expected("expected_seq", expected_seq)
        version = check_expected("expected_version", expected_version)
        has_state = state is not None
        text = check_json_object("state", state) if has_state else None
        if has_state and version is None:
            raise ConfigError(
                "expected_version=None: required with state= (saving state is a "
                "compare-and-set; load_state() gives the current version)"
            )
        texts: dict[str, str] = {}
        if counts is not None:
            given = check_counts(counts)
            ids = {m.id for m in batch}
            for mid in given:
                if mid not in ids:
                    raise ConfigError(
                        f"counts[{mid!r}]: not a message of this batch (set_counts stores "
                        "counts of messages already stored)"
                    )
            texts = {mid: dumps(c) for mid, c in given.items()}
        key, hint = self._key, self._hint
        return Call(
            lambda tx: writes.append(tx, key, batch, seq, text, has_state, version, texts, hint),
            True,
        )

    def _pop_item(self) -> Call[Message | None]:
        key = self._key
        return Call(lambda tx: writes.pop_item(tx, key), True)

    def _clear_session(self) -> Call[None]:
        key = self._key
        return Call(lambda tx: writes.clear_session(tx, key), True)

    def _truncate(self, keep: object) -> Call[None]:
        key, n = self._key, _check.non_negative_int("keep", keep)
        return Call(lambda tx: writes.truncate(tx, key, n), True)

    def _save_state(self, state: Mapping[str, Any] | None, expected_version: object) -> Call[int]:
        text = None if state is None else check_json_object("state", state)
        version = _check.non_negative_int("expected_version", expected_version)
        key = self._key
        return Call(lambda tx: writes.save_state(tx, key, text, version), True)

    def _set_counts(self, counts: object) -> Call[None]:
        given = check_counts(counts)
        key = self._key
        return Call(lambda tx: writes.set_counts(tx, key, given), True)

    def _set_metadata(self, metadata: object) -> Call[None]:
        text = check_json_object("metadata", metadata)
        key = self._key
        return Call(lambda tx: writes.set_metadata(tx, key, text), True)


def sessions_call(
    user_id: object, tenant: object, cursor: object, limit: object
) -> Call[tuple[list[SessionInfo], str | None]]:
    uid = check_name("user_id", user_id, optional=True)
    ten = check_name("tenant", tenant, optional=True) or ""
    before = decode_cursor(cursor, "s", "sessions()")
    n = check_page_limit(limit)
    return Call(lambda tx: ops.list_sessions(tx, ten, uid, before, n), False)


def tenant_counts_call(user_id: object) -> Call[dict[str | None, int]]:
    uid = check_name("user_id", user_id, optional=True)
    return Call(lambda tx: ops.tenant_counts(tx, uid), False)


def delete_session_call(session_id: object, user_id: object, tenant: object) -> Call[bool]:
    key = check_session_key(session_id, user_id, tenant)
    return Call(lambda tx: writes.delete_session(tx, key), True)


def erase_user_call(user_id: object, tenant: object) -> Call[int]:
    uid = check_name("user_id", user_id)
    ten = check_name("tenant", tenant, optional=True) or ""
    assert uid is not None
    return Call(lambda tx: writes.erase_user(tx, ten, uid), True)


def sweep_call() -> Call[int]:
    return Call(writes.sweep, True)
