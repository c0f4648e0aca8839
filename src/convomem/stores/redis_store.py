"""Durable sessions in Redis (the ``redis`` client): ``open_store("redis://host:6379/0")``.

``rediss://`` connects over TLS (``ssl_ca_certs``: the CA file, when not a system one);
``redis+cluster://host:port`` to a Redis Cluster (any node; the others are discovered),
``rediss+cluster://`` over TLS. The semantics are the backend-neutral ones of
``convomem.stores.database``; what is Redis's own:

- **Atomicity.** Every session operation is one Lua script (``_redis_lua``): an append
  checks ids (idempotency), ``expected_seq`` and the state version, takes seqs and
  writes messages, counts and state at once, in one round trip. All the keys of a
  session share one hash tag (``{tenant:session}``), so the same scripts run on a
  cluster.
- **Listing.** A tenant's index of sessions (sorted sets in the tenant's own slot) is
  written before a session is created and cleaned after it is deleted; see
  ``_redis_admin``. ``sweep()`` also drops the entries of sessions gone.
- **TTL.** ``expires_at`` is checked by the scripts against the caller's clock (expired:
  invisible at once), and every key of the session gets a native expiry (``PEXPIRE``)
  at the same moment, so Redis removes expired sessions by itself.
- **Durability** is the server's: with ``appendonly yes`` (and ``appendfsync
  everysec`` or ``always``) an acknowledged append survives a restart. Erased data
  (``erase_user``, ``delete_session``) leaves memory at once but stays in the AOF and
  RDB files until the server next rewrites them (``BGREWRITEAOF``, ``BGSAVE``).
- **Maintenance.** ``sweep()`` reads every index entry of the prefix (pipelined): run
  it from a periodic job, not per request.
- **A session lock.** While the key ``<prefix>:{tenant:session}:lock`` exists (an
  operator's ``SET ... PX <ms>`` during maintenance), writes to the session fail with a
  ``TransientError`` and are retried by the ``RetryPolicy``.
- **Faults.** Connection losses, timeouts, failovers (``READONLY``, ``MASTERDOWN``,
  ``CLUSTERDOWN``, ``TRYAGAIN``) are ``TransientError`` s, retried by the database's
  ``RetryPolicy``; a retried append is safe (appends are idempotent). Other errors are
  ``StoreError`` s.

Options: ``prefix`` (of every key, default ``convomem``; several applications or tests
share a server with their own), ``socket_timeout`` (seconds, default 5),
``ssl_ca_certs`` and the common
``ttl``, ``ttl_refresh``, ``retry``, ``clock``. The password of a URL is never shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from .. import _check, _io
from ..errors import ConfigError, MissingDependency, StoreError
from ..retry import RetryPolicy
from . import _redis_ops as ops
from ._database_api import DatabaseAPI
from ._redis_admin import check_layout
from ._redis_calls import (
    DatabaseCalls,
    RedisCalls,
    Target,
    attempt,
    parse_target,
    translate,
)
from ._session_api import SessionAPI
from .database import StoreKind, StoreStats, TTLPolicy

__all__ = ["RedisDatabase", "RedisSession"]

T = TypeVar("T")


def ttl_policy(ttl: float | TTLPolicy | None, ttl_refresh: str) -> TTLPolicy:
    if isinstance(ttl, TTLPolicy):
        if ttl_refresh != "write":
            raise ConfigError(
                f"ttl_refresh={ttl_refresh!r}: give it inside the TTLPolicy passed as ttl"
            )
        return ttl
    return TTLPolicy(ttl, ttl_refresh)  # type: ignore[arg-type]


def check_common(retry: object, clock: object) -> tuple[RetryPolicy, Callable[[], float]]:
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigError(f"retry={retry!r}: must be a RetryPolicy or None")
    checked_clock = _check.function("clock", clock, "() -> epoch seconds")
    return RetryPolicy() if retry is None else retry, checked_clock


def missing_redis() -> MissingDependency:
    return MissingDependency("the Redis store", "redis", "redis")


class RedisDatabase(DatabaseCalls, DatabaseAPI):
    """Sessions in one Redis server or cluster; see the module docstring. Prefer
    ``open_store(url)``; ``url`` is the full URL (password included)."""

    kind: StoreKind = "redis"
    schema: str | None = None

    def __init__(
        self,
        url: str,
        *,
        prefix: str | None = None,
        ttl: float | TTLPolicy | None = None,
        ttl_refresh: str = "write",
        socket_timeout: float = 5.0,
        ssl_ca_certs: str | None = None,
        retry: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl = ttl_policy(ttl, ttl_refresh)
        self._retry, self._clock = check_common(retry, clock)
        self._target: Target = parse_target(url, prefix, socket_timeout, ssl_ca_certs)
        self.url = self._target.shown
        self.prefix: str | None = self._target.prefix
        self._work = ops.Work()
        self._registered: set[str] = set()
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.cluster import RedisCluster
            from redis.retry import Retry
        except ImportError:
            raise missing_redis() from None
        self._errors: tuple[type[Exception], ...] = (
            redis.exceptions.RedisError,
            redis.exceptions.RedisClusterException,
        )
        self._noscript = redis.exceptions.NoScriptError
        options = dict(self._target.options)
        self._client: Any = None
        try:
            if self._target.cluster:
                self._client = RedisCluster.from_url(self._target.connect, **options)
            else:
                # No retries inside redis-py: the RetryPolicy decides, once.
                options["retry"] = Retry(NoBackoff(), 0)
                self._client = redis.Redis.from_url(self._target.connect, **options)
            self._retry.call(self._attempt, check_layout)
        except self._errors as exc:
            raise translate(exc, self._where()) from exc

    def _where(self) -> str:
        return f"redis {self.url}"

    # -- the driver ------------------------------------------------------------------

    def _attempt(self, op: ops.Op[T]) -> T:
        """One attempt of an operation: run its generator, sending what it yields."""
        if self._client is None:
            raise StoreError(f"{self._where()}: the database is closed")
        prefix = self._target.prefix
        gen = op(ops.Ctx(self._clock(), self.ttl, prefix, self._work, self._registered))
        try:
            return _io.run(attempt(gen, self._client, self._work, self._noscript))
        except self._errors as exc:
            raise translate(exc, self._where()) from exc

    def _run(self, op: ops.Op[T]) -> T:
        result: T = self._retry.call(self._attempt, op)
        return result

    # -- the database ----------------------------------------------------------------

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> RedisSession:
        """The session ``session_id`` of ``tenant``, acting for ``user_id`` (no I/O)."""
        return RedisSession(self, session_id, user_id, tenant)

    def stats(self) -> StoreStats:
        """Commands sent, writes done and rows read since the database was opened."""
        s, t, r = self._work.counts
        return StoreStats(statements=s, transactions=t, rows_read=r)

    def close(self) -> None:
        """Close the connections."""
        client, self._client = self._client, None
        if client is not None:
            client.close()


class RedisSession(RedisCalls, SessionAPI):
    """One session of a ``RedisDatabase`` (a ``SessionStore``); see
    ``convomem.stores.database`` for the semantics of each method."""

    __slots__ = ("_db",)

    def __init__(self, db: RedisDatabase, session_id: str, user_id: object, tenant: object):
        super().__init__(session_id, user_id, tenant)
        self._db = db

    def _run(self, op: ops.Op[T]) -> T:
        return self._db._run(op)

    def __repr__(self) -> str:
        return f"<RedisSession {self.session_id!r} of {self._db.url}>"
