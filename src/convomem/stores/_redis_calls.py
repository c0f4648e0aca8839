"""Each public Redis call, checked and bound to its operation before any I/O; the sync
and async sessions derive from ``RedisCalls`` and the databases from ``DatabaseCalls``,
so the twins cannot drift apart. Also what both drivers share: the connection options
read from a URL, one attempt of an operation (``attempt``, the client's calls as
``_io.Call`` s) and the mapping of redis-py's errors (``translate``)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit, urlunsplit

from .. import _check, _io
from ..errors import ConfigError, StoreError, TransientError
from ..model import Message
from . import _redis_admin as admin
from . import _redis_lua as lua
from . import _redis_ops as ops
from ._calls import (
    check_append,
    check_listing,
    check_message_ids,
    check_owner,
    check_session_key,
)
from ._sqlite_ops import Key
from .base import check_limit
from .database import Counts, LogEntry, SessionInfo
from .records import (
    check_counts,
    check_json_object,
    check_name,
    check_page_limit,
    decode_cursor,
    dumps,
    encode_messages,
)
from .statements import Command, Eval, Request
from .url import redact_url

__all__ = ["DatabaseCalls", "RedisCalls", "Target", "attempt", "parse_target", "translate"]

T = TypeVar("T")

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


def _send(client: Any, work: ops.Work, noscript: type[Exception], request: Request) -> _io.Gen[Any]:
    """One request as the client's calls, counted: a script by its SHA-1, then by its
    source when the server does not know it yet (``EVAL`` also caches it there)."""
    if isinstance(request, Eval):
        s, keys, args = request.script, request.keys, request.args
        work.add(statements=1)
        try:
            return (yield _io.call(client.evalsha, s.sha, len(keys), *keys, *args))
        except noscript:
            pass
        work.add(statements=1)
        return (yield _io.call(client.eval, s.source, len(keys), *keys, *args))
    if isinstance(request, Command):
        work.add(statements=1)
        return (yield _io.call(client.execute_command, *request.args))
    work.add(statements=len(request.commands))
    pipe = client.pipeline(transaction=False)
    for command in request.commands:
        pipe.execute_command(*command)
    return (yield _io.call(pipe.execute))


def attempt(
    gen: Generator[Request, Any, T], client: Any, work: ops.Work, noscript: type[Exception]
) -> _io.Gen[T]:
    """One attempt of an operation: its generator run to its end, each request sent
    (the sync driver runs this with ``_io.run``, the async one with ``_io.arun``). A
    client's error ends the attempt: it is not thrown into the operation."""
    reply: Any = None
    try:
        while True:
            try:
                request = gen.send(reply)
            except StopIteration as stop:
                result: T = stop.value
                return result
            reply = yield from _send(client, work, noscript, request)
    finally:
        gen.close()


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
        return partial(ops.get_counts, key=self._key, ids=check_message_ids(message_ids))

    def _append(
        self,
        messages: object,
        expected_seq: object,
        state: Mapping[str, Any] | None,
        expected_version: object,
        counts: Counts | None,
    ) -> ops.Op[int]:
        batch = encode_messages(messages)
        a = check_append(batch, expected_seq, state, expected_version, counts)
        return partial(
            ops.append,
            key=self._key,
            batch=batch,
            expected_seq=a.expected_seq,
            state=a.state,
            expected_version=a.expected_version,
            counts=a.counts,
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


class DatabaseCalls:
    """The calls of a database (``_database_api``); the sync and async databases derive
    from it."""

    __slots__ = ()

    def _sessions(
        self, user_id: object, tenant: object, cursor: object, limit: object
    ) -> ops.Op[tuple[list[SessionInfo], str | None]]:
        a = check_listing(user_id, tenant, cursor, limit)
        return partial(
            admin.list_sessions, tenant=a.tenant, user_id=a.user_id, before=a.before, limit=a.limit
        )

    def _tenant_counts(self, user_id: object) -> ops.Op[dict[str | None, int]]:
        return partial(admin.tenant_counts, user_id=check_name("user_id", user_id, optional=True))

    def _delete_session(self, session_id: object, user_id: object, tenant: object) -> ops.Op[bool]:
        return partial(admin.delete_session, key=check_session_key(session_id, user_id, tenant))

    def _erase_user(self, user_id: object, tenant: object) -> ops.Op[int]:
        ten, uid = check_owner(user_id, tenant)
        return partial(admin.erase_user, tenant=ten, user_id=uid)

    def _sweep(self) -> ops.Op[int]:
        return admin.sweep

    def _statements(self, op: Callable[[], Generator[Request, Any, T]], write: bool) -> ops.Op[T]:
        """A caller's own operation of Redis requests (each atomic on its own)."""
        return lambda ctx: op()
