"""The async twin of the Redis store (``redis.asyncio``): ``await aopen_store(url)``.

The same operations as ``RedisDatabase`` (``_redis_ops``, ``_redis_admin``), checked by
the same calls (``_redis_calls``), sent with ``await``; transient failures are retried
by the same ``RetryPolicy``, waiting with ``asyncio.sleep``. A database belongs to the
event loop it was opened on. Cancelling a call stops the wait, not a script the server
already runs: it applies whole or not at all, and appends are idempotent, so a caller
that does not know may send the batch again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from .. import _io
from ..errors import StoreError
from ..retry import RetryPolicy
from . import _redis_ops as ops
from ._database_api import AsyncDatabaseAPI
from ._redis_admin import check_layout
from ._redis_calls import (
    DatabaseCalls,
    RedisCalls,
    attempt,
    parse_target,
    translate,
)
from ._session_api import AsyncSessionAPI
from .database import StoreKind, StoreStats, TTLPolicy
from .redis_store import check_common, missing_redis, ttl_policy

__all__ = ["AsyncRedisDatabase", "AsyncRedisSession"]

T = TypeVar("T")


_COMMAND_TABLES: dict[str, dict[str, Any]] = {}


def _share_command_table(client: Any, where: str) -> None:
    """The async cluster client reads the server's whole ``COMMAND`` table when it
    connects (thousands of lines through a pure-Python parser: most of the time it takes
    to open); databases on the same cluster in one process read it once."""
    parser = getattr(client, "commands_parser", None)
    if parser is None or not hasattr(parser, "initialize"):
        return
    read = parser.initialize

    async def initialize(node: Any = None) -> None:
        if node is not None:
            parser.node = node
        if where in _COMMAND_TABLES:
            parser.commands = _COMMAND_TABLES[where]
            return
        await read(node)
        _COMMAND_TABLES[where] = parser.commands

    parser.initialize = initialize


class AsyncRedisDatabase(DatabaseCalls, AsyncDatabaseAPI):
    """Sessions in one Redis server or cluster, for asyncio; see ``RedisDatabase`` for
    the options. Make one with ``await AsyncRedisDatabase.open(url, ...)`` or ``await
    aopen_store(url)``."""

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
        target = parse_target(url, prefix, socket_timeout, ssl_ca_certs)
        self.url = target.shown
        self.prefix: str | None = target.prefix
        self._prefix = target.prefix
        self._work = ops.Work()
        self._registered: set[str] = set()
        try:
            import redis.asyncio as aredis
            import redis.exceptions as rx
            from redis.asyncio.cluster import RedisCluster
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError:
            raise missing_redis() from None
        self._errors: tuple[type[Exception], ...] = (rx.RedisError, rx.RedisClusterException)
        self._noscript = rx.NoScriptError
        options = dict(target.options)
        self._client: Any
        if target.cluster:
            self._client = RedisCluster.from_url(target.connect, **options)
            _share_command_table(self._client, target.connect)
        else:
            self._client = aredis.Redis.from_url(
                target.connect, retry=Retry(NoBackoff(), 0), **options
            )

    @classmethod
    async def open(cls, url: str, *, workers: int | None = None, **options: Any) -> Any:
        """Open the database and check the server answers. ``workers`` is accepted for
        the options every async backend takes, and unused: asyncio needs no threads."""
        db = cls(url, **options)
        try:
            await db._arun(check_layout)
        except BaseException:
            await db.aclose()
            raise
        return db

    def _where(self) -> str:
        return f"redis {self.url}"

    # -- the driver ------------------------------------------------------------------

    async def _attempt(self, op: ops.Op[T]) -> T:
        if self._client is None:
            raise StoreError(f"{self._where()}: the database is closed")
        prefix = self._prefix
        gen = op(ops.Ctx(self._clock(), self.ttl, prefix, self._work, self._registered))
        try:
            return await _io.arun(attempt(gen, self._client, self._work, self._noscript))
        except self._errors as exc:
            raise translate(exc, self._where()) from exc

    async def _arun(self, op: ops.Op[T]) -> T:
        result: T = await self._retry.acall(self._attempt, op)
        return result

    # -- the database ----------------------------------------------------------------

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> AsyncRedisSession:
        """The session ``session_id`` of ``tenant``, acting for ``user_id`` (no I/O)."""
        return AsyncRedisSession(self, session_id, user_id, tenant)

    def stats(self) -> StoreStats:
        """Commands sent, writes done and rows read since the database was opened."""
        s, t, r = self._work.counts
        return StoreStats(statements=s, transactions=t, rows_read=r)

    async def aclose(self) -> None:
        """Close the connections."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


class AsyncRedisSession(RedisCalls, AsyncSessionAPI):
    """One session of an ``AsyncRedisDatabase`` (an ``AsyncSessionStore``); each method
    is the coroutine twin of ``RedisSession``'s."""

    __slots__ = ("_db",)

    def __init__(
        self, db: AsyncRedisDatabase, session_id: str, user_id: object, tenant: object
    ) -> None:
        super().__init__(session_id, user_id, tenant)
        self._db = db

    async def _arun(self, op: ops.Op[T]) -> T:
        return await self._db._arun(op)

    def __repr__(self) -> str:
        return f"<AsyncRedisSession {self.session_id!r} of {self._db.url}>"
