"""The checks of each call's arguments, shared by the three backends' call builders
(``_sqlite_calls``, ``_pg_calls``, ``_redis_calls``): a call is checked here, the same
way on every backend, before its operation is built, so bad input raises the same
``ConvomemError`` everywhere and nothing is read or written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from .. import _check
from ..errors import ConfigError
from ._sqlite_ops import Key
from .database import Counts
from .records import (
    EncodedMessage,
    check_counts,
    check_expected,
    check_json_object,
    check_name,
    check_page_limit,
    decode_cursor,
    dumps,
)


def check_session_key(session_id: object, user_id: object, tenant: object) -> Key:
    """The validated name of a session and the user a handle acts for."""
    sid = check_name("session_id", session_id)
    uid = check_name("user_id", user_id, optional=True)
    ten = check_name("tenant", tenant, optional=True)
    assert sid is not None
    return Key(ten or "", sid, uid)


def check_message_ids(message_ids: object) -> list[str] | None:
    """``get_counts``' ids: None (every message) or a list of strings."""
    if message_ids is None:
        return None
    if isinstance(message_ids, str | bytes) or not isinstance(message_ids, Sequence):
        raise ConfigError(f"message_ids={message_ids!r}: must be a list of ids or None")
    ids = list(message_ids)
    for i, mid in enumerate(ids):
        if not isinstance(mid, str):
            raise ConfigError(f"message_ids[{i}]={mid!r}: must be a string")
    return ids


class Append(NamedTuple):
    """An append's options, checked: ``state`` as JSON text (``has_state``: given),
    ``counts`` as ``{message_id: JSON text}``."""

    expected_seq: int | None
    state: str | None
    has_state: bool
    expected_version: int | None
    counts: dict[str, str]


def check_append(
    batch: Sequence[EncodedMessage],
    expected_seq: object,
    state: Mapping[str, Any] | None,
    expected_version: object,
    counts: Counts | None,
) -> Append:
    """The options of an append of ``batch`` (encoded already): the counts must be of
    messages of the batch, and ``state`` needs ``expected_version``."""
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
    return Append(seq, text, has_state, version, texts)


class Listing(NamedTuple):
    """A ``sessions()`` call, checked (``tenant`` ``''``: none)."""

    tenant: str
    user_id: str | None
    before: int | None
    limit: int


def check_listing(user_id: object, tenant: object, cursor: object, limit: object) -> Listing:
    """The arguments of ``db.sessions()``."""
    uid = check_name("user_id", user_id, optional=True)
    ten = check_name("tenant", tenant, optional=True) or ""
    before = decode_cursor(cursor, "s", "sessions()")
    return Listing(ten, uid, before, check_page_limit(limit))


def check_owner(user_id: object, tenant: object) -> tuple[str, str]:
    """``(tenant, user_id)`` of ``erase_user`` (tenant ``''``: none; a user is required)."""
    uid = check_name("user_id", user_id)
    ten = check_name("tenant", tenant, optional=True) or ""
    assert uid is not None
    return ten, uid


def check_statements(op: object, write: object) -> bool:
    """``run_statements``' arguments: ``op`` a function making a generator, ``write`` a
    flag (returned)."""
    _check.function("op", op, "() -> a generator of statements")
    return _check.flag("write", write)
