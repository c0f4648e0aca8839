"""The async twin of the PostgreSQL store: ``psycopg``'s async connections from a
``psycopg_pool.AsyncConnectionPool``.

``await aopen_store("postgresql://...")`` gives an ``AsyncPostgresDatabase``; its
sessions are ``AsyncStore`` s (``AsyncSessionStore``). Every call is built and checked by
the same code as the sync one (``_pg_calls``) and drives the same operation
(``_pg_ops``, ``_pg_writes``); only the awaits differ. Transient failures are retried by
the same ``RetryPolicy``, waiting with ``asyncio.sleep``.

Cancelling a call while a write runs rolls its transaction back (or, past the commit,
leaves it committed): appends are idempotent, so a caller that does not know may safely
send the batch again.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeVar

from .. import _io
from ..errors import StoreError
from . import _pg_ops as ops
from ._database_api import AsyncDatabaseAPI
from ._pg_calls import DatabaseCalls, PgCall, SessionCalls, check_session_key
from ._pg_schema import migrate
from ._pg_settings import AsyncConnectionPool, Counter, Settings, perform, psycopg
from ._session_api import AsyncSessionAPI
from .database import StoreKind, StoreStats, TTLPolicy

__all__ = ["AsyncPostgresDatabase", "AsyncPostgresSession"]

T = TypeVar("T")


class AsyncPostgresDatabase(DatabaseCalls, AsyncDatabaseAPI):
    """Sessions in one PostgreSQL database, for asyncio; see ``PostgresDatabase`` for
    the options. Make one with ``await AsyncPostgresDatabase.open(conninfo, ...)`` or
    ``await aopen_store(url)``."""

    kind: StoreKind = "postgresql"
    prefix: str | None = None

    def __init__(self, settings: Settings, pool: AsyncConnectionPool[Any]) -> None:
        self._settings = settings
        self._pool = pool
        self._spare: psycopg.AsyncConnection[Any] | None = None
        self._closed = False
        self._counter = Counter()
        self._retry = settings.retry
        self.url: str = settings.url
        self.ttl: TTLPolicy = settings.ttl
        self.schema: str | None = settings.schema

    @classmethod
    async def open(cls, conninfo: Mapping[str, Any], **options: Any) -> AsyncPostgresDatabase:
        """Connect, migrate, and open the pool."""
        s = Settings(conninfo, **options)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            s.conninfo,
            min_size=0,  # the spare connection serves one caller at a time
            max_size=s.pool_size,
            kwargs={"autocommit": True, "prepare_threshold": None},
            timeout=s.connect_timeout,
            open=False,
            name="convomem",
        )
        db = cls(s, pool)
        await s.retry.acall(db._migrate)
        await pool.open(wait=False)
        return db

    async def _migrate(self) -> None:
        """Connect and migrate; the connection stays as the spare (see the sync twin)."""
        s = self._settings
        try:
            conn = await psycopg.AsyncConnection.connect(
                s.conninfo, autocommit=True, prepare_threshold=None
            )
            try:
                await self._drive(conn, migrate(s.schema, s.schema_name))
            except BaseException:
                await conn.close()
                raise
        except BaseException as exc:
            raise s.translate(exc) from exc
        self._spare = conn

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The spare connection when it is free, else one of the pool."""
        conn, self._spare = self._spare, None
        if conn is None or conn.closed:
            async with self._pool.connection() as pooled:
                yield pooled
            return
        try:
            yield conn
        finally:
            idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            if idle and not self._closed and self._spare is None:
                self._spare, conn = conn, None
            if conn is not None:
                await conn.close()

    async def _drive(self, conn: psycopg.AsyncConnection[Any], gen: ops.Op) -> Any:
        counter = self._counter
        cur = conn.cursor()

        try:
            return await _io.adrive(gen, lambda q: _io.arun(perform(cur, counter, q)))
        except BaseException:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                with contextlib.suppress(psycopg.Error):
                    await conn.execute("ROLLBACK")
            raise

    async def _attempt(self, call: PgCall[T]) -> T:
        s = self._settings
        tx = s.tx()
        try:
            async with self._connection() as conn:
                result: T = await self._drive(conn, call.fn(tx))
                return result
        except BaseException as exc:
            error = s.translate(exc)
            if error is exc:
                raise
            raise error from exc

    async def _arun(self, call: PgCall[T]) -> T:
        if self._closed:
            raise StoreError(f"{self._settings.where}: the database is closed")
        result: T = await self._retry.acall(self._attempt, call)
        return result

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> AsyncPostgresSession:
        """The session ``session_id`` of ``tenant``, acting for ``user_id`` (no I/O)."""
        return AsyncPostgresSession(self, check_session_key(session_id, user_id, tenant))

    def stats(self) -> StoreStats:
        """Statements, write transactions and rows read since the database was opened."""
        return self._counter.stats()

    async def aclose(self) -> None:
        """Close every connection of the pool."""
        self._closed = True
        spare, self._spare = self._spare, None
        if spare is not None:
            await spare.close()
        await self._pool.close()


class AsyncPostgresSession(SessionCalls, AsyncSessionAPI):
    """One session of an ``AsyncPostgresDatabase`` (an ``AsyncSessionStore``); each
    method is the coroutine twin of ``PostgresSession``'s."""

    __slots__ = ("_db",)

    def __init__(self, db: AsyncPostgresDatabase, key: ops.Key) -> None:
        super().__init__(key)
        self._db = db

    async def _arun(self, op: PgCall[T]) -> T:
        return await self._db._arun(op)

    def __repr__(self) -> str:
        return f"<AsyncPostgresSession {self.session_id!r} of {self._db.url}>"
