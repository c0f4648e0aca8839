"""Each public Redis call, checked and bound to its operation before any I/O; the sync
and async sessions derive from ``RedisCalls``, so the twins cannot drift apart. Also the
connection options both drivers read from a URL."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from .. import _check
from ..errors import ConfigError, StoreError, TransientError
from ..model import Message
from . import _redis_admin as admin
from . import _redis_lua as lua
from . import _redis_ops as ops
from ._sqlite_calls import check_session_key
from ._sqlite_ops import Key
from .base import check_limit
from .database import Counts, LogEntry, SessionInfo
from .records import (
    check_counts,
    check_expected,
    check_json_object,
    check_name,
    check_page_limit,
    decode_cursor,
    dumps,
    encode_messages,
)
from .url import redact_url

__all__ = ["RedisCalls", "Target", "parse_target", "translate"]

_PREFIX: Final = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")


@dataclass(frozen=True, slots=True)
class Target:
    """Where a database connects: the redis-py URL (password included, never shown),
    whether it is a cluster, and what to show."""

    connect: str
    cluster: bool
    shown: str
    prefix: str
    options: dict[str, Any]
    """redis-py connection options."""


def parse_target(url: str, prefix: object, socket_timeout: object, ssl_ca_certs: object) -> Target:
    """The connection of a ``redis://``, ``rediss://`` or ``redis+cluster://`` URL (its
    query was read by ``open_store``); ``ConfigError`` naming the URL (password hidden)."""
    shown = redact_url(url)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    path = parts.path.strip("/")
    if path and not path.isdigit():
        raise ConfigError(f"url={shown!r}: the path {parts.path!r} must be a database number")
    cluster = scheme.endswith("+cluster")
    tls = scheme.startswith("rediss")
    if cluster and path not in ("", "0"):
        raise ConfigError(f"url={shown!r}: a Redis Cluster has only database 0")
    text = "convomem" if prefix is None else prefix
    if not isinstance(text, str) or not _PREFIX.fullmatch(text):
        raise ConfigError(
            f"prefix={text!r}: must be 1 to 64 of A-Z a-z 0-9 _ . : / - (no braces: the "
            "keys' hash tags follow it)"
        )
    timeout = _check.number("socket_timeout", socket_timeout, minimum=0.0, low_open=True)
    options: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if ssl_ca_certs is not None:
        if not isinstance(ssl_ca_certs, str) or not tls:
            raise ConfigError(
                f"ssl_ca_certs={ssl_ca_certs!r}: a CA file path, for rediss:// URLs only"
            )
        options["ssl_ca_certs"] = ssl_ca_certs
    connect = urlunsplit(("rediss" if tls else "redis", parts.netloc, parts.path, "", ""))
    return Target(connect, cluster, shown, text, options)


def translate(exc: Exception, where: str) -> Exception:
    """A redis-py error as a convomem one: connection losses, timeouts, failovers and
    cluster reconfigurations are transient; anything else is a ``StoreError``."""
    import redis.exceptions as rx

    transient = (
        rx.ConnectionError,
        rx.TimeoutError,
        rx.ClusterDownError,
        rx.TryAgainError,
        rx.MasterDownError,
        rx.ReadOnlyError,
        rx.SlotNotCoveredError,
    )
    text = f"{where}: {type(exc).__name__}: {exc}"
    # Refused credentials or certificates come as connection errors; retrying cannot help.
    refused = (rx.AuthenticationError, rx.AuthorizationError, rx.NoPermissionError)
    if isinstance(exc, refused) or "CERTIFICATE_VERIFY_FAILED" in str(exc):
        return StoreError(text)
    if isinstance(exc, transient) or "NOREPLICAS" in str(exc) or "LOADING" in str(exc):
        return TransientError(text)
    return StoreError(text)


class RedisCalls:
    """The calls of one session handle: each checks its arguments and returns an
    operation (``ops.Op``) for the driver."""

    __slots__ = ("_key", "session_id", "tenant", "user_id")

    def __init__(self, session_id: object, user_id: object, tenant: object) -> None:
        self._key: Key = check_session_key(session_id, user_id, tenant)
        self.session_id: str = self._key.session_id
        self.user_id: str | None = self._key.user_id
        self.tenant: str | None = self._key.tenant_or_none

    def _get_items(self, limit: object) -> ops.Op[list[Message]]:
        return partial(ops.get_items, key=self._key, limit=check_limit(limit))

    def _entries(
        self, cursor: object, limit: object, newest_first: object
    ) -> ops.Op[tuple[list[LogEntry], str | None]]:
        back = _check.flag("newest_first", newest_first)
        n = check_page_limit(limit)
        what = f"page()/entries() with newest_first={back}"
        position = decode_cursor(cursor, "b" if back else "f", what)
        return partial(ops.entries, key=self._key, position=position, limit=n, back=back)

    def _last_seq(self) -> ops.Op[int]:
        return partial(ops.last_seq, key=self._key)

    def _info(self) -> ops.Op[SessionInfo | None]:
        return partial(ops.info, key=self._key)

    def _load_state(self) -> ops.Op[tuple[dict[str, Any] | None, int]]:
        return partial(ops.load_state, key=self._key)

    def _get_counts(self, message_ids: object) -> ops.Op[dict[str, dict[str, int]]]:
        ids: list[str] | None = None
        if message_ids is not None:
            if isinstance(message_ids, str | bytes) or not isinstance(message_ids, Sequence):
                raise ConfigError(f"message_ids={message_ids!r}: must be a list of ids or None")
            ids = list(message_ids)
            for i, mid in enumerate(ids):
                if not isinstance(mid, str):
                    raise ConfigError(f"message_ids[{i}]={mid!r}: must be a string")
        return partial(ops.get_counts, key=self._key, ids=ids)

    def _append(
        self,
        messages: object,
        expected_seq: object,
        state: Mapping[str, Any] | None,
        expected_version: object,
        counts: Counts | None,
    ) -> ops.Op[int]:
        batch = encode_messages(messages)
        seq = check_expected("expected_seq", expected_seq)
        version = check_expected("expected_version", expected_version)
        text = None if state is None else check_json_object("state", state)
        if text is not None and version is None:
            raise ConfigError(
                "expected_version=None: required with state= (saving state is a "
                "compare-and-set; load_state() gives the current version)"
            )
        given = {} if counts is None else check_counts(counts)
        in_batch = {m.id for m in batch}
        for mid in given:
            if mid not in in_batch:
                raise ConfigError(
                    f"counts[{mid!r}]: not a message of this batch (set_counts stores "
                    "counts of messages already stored)"
                )
        texts = {mid: dumps(c) for mid, c in given.items()}
        return partial(
            ops.append,
            key=self._key,
            batch=batch,
            expected_seq=seq,
            state=text,
            expected_version=version,
            counts=texts,
        )

    def _pop_item(self) -> ops.Op[Message | None]:
        # A token per call, kept across the retries of its attempts.
        return partial(ops.pop_item, key=self._key, memo={"token": uuid.uuid4().hex})

    def _clear_session(self) -> ops.Op[None]:
        return ops.simple(lua.CLEAR, self._key)

    def _truncate(self, keep: object) -> ops.Op[None]:
        n = _check.non_negative_int("keep", keep)
        return ops.simple(lua.TRUNCATE, self._key, str(n))

    def _save_state(self, state: Mapping[str, Any] | None, expected_version: object) -> ops.Op[int]:
        text = None if state is None else check_json_object("state", state)
        version = _check.non_negative_int("expected_version", expected_version)
        return partial(
            ops.save_state,
            key=self._key,
            state=text,
            expected_version=version,
            token=uuid.uuid4().hex,
        )

    def _set_counts(self, counts: object) -> ops.Op[None]:
        texts = {mid: dumps(c) for mid, c in check_counts(counts).items()}
        return partial(ops.set_counts, key=self._key, counts=texts)

    def _set_metadata(self, metadata: object) -> ops.Op[None]:
        text = check_json_object("metadata", metadata)
        return ops.simple(lua.SET_METADATA, self._key, text)


def sessions_op(
    user_id: object, tenant: object, cursor: object, limit: object
) -> ops.Op[tuple[list[SessionInfo], str | None]]:
    uid = check_name("user_id", user_id, optional=True)
    ten = check_name("tenant", tenant, optional=True) or ""
    before = decode_cursor(cursor, "s", "sessions()")
    n = check_page_limit(limit)
    return partial(admin.list_sessions, tenant=ten, user_id=uid, before=before, limit=n)


def tenant_counts_op(user_id: object) -> ops.Op[dict[str | None, int]]:
    uid = check_name("user_id", user_id, optional=True)
    return partial(admin.tenant_counts, user_id=uid)


def delete_session_op(session_id: object, user_id: object, tenant: object) -> ops.Op[bool]:
    return partial(admin.delete_session, key=check_session_key(session_id, user_id, tenant))


def erase_user_op(user_id: object, tenant: object) -> ops.Op[int]:
    uid = check_name("user_id", user_id)
    ten = check_name("tenant", tenant, optional=True) or ""
    assert uid is not None
    return partial(admin.erase_user, tenant=ten, user_id=uid)


def sweep_op() -> ops.Op[int]:
    return admin.sweep
