"""The async twin of the SQLite store: the same calls, run in worker threads.

``await aopen_store("sqlite:///chat.db")`` gives an ``AsyncSQLiteDatabase``; its
sessions are ``AsyncStore`` s (``AsyncSessionStore``). Every call is built and checked by
the same code as the sync one (``_sqlite_calls``) and runs the same SQLite operation
through the same driver (``_sqlite_driver``), on a connection of its own worker thread
(``workers`` of them, 4 by default), so the event loop never blocks on SQLite. Transient
failures are retried by the same ``RetryPolicy``, waiting with ``asyncio.sleep``.

Cancelling a call stops the wait, not the operation: a write already handed to its
thread commits or not as a whole. Appends are idempotent, so a caller that does not know
may safely send the batch again.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .. import _check
from ..errors import StoreError
from . import _sqlite_ops as ops
from ._database_api import AsyncDatabaseAPI
from ._session_api import AsyncSessionAPI
from ._sqlite_calls import DatabaseCalls, SessionCalls, SQLiteCall, check_session_key
from ._sqlite_driver import SQLiteDriver
from .database import StoreKind, StoreStats, TTLPolicy

__all__ = ["AsyncSQLiteDatabase", "AsyncSQLiteSession"]

T = TypeVar("T")


class AsyncSQLiteDatabase(DatabaseCalls, AsyncDatabaseAPI):
    """Sessions in one SQLite file (or in memory), for asyncio; see ``SQLiteDatabase``
    for the options. Make one with ``await AsyncSQLiteDatabase.open(path, ...)`` or
    ``await aopen_store(url)``."""

    kind: StoreKind = "sqlite"
    schema: str | None = None
    prefix: str | None = None

    def __init__(self, driver: SQLiteDriver, executor: ThreadPoolExecutor) -> None:
        self._driver = driver
        self._executor = executor
        self.url: str = driver.url
        self.path: str | None = driver.path
        self.ttl: TTLPolicy = driver.ttl

    @classmethod
    async def open(
        cls, path: str | None = None, *, workers: int = 4, **options: Any
    ) -> AsyncSQLiteDatabase:
        """Open (and migrate) the database in a worker thread."""
        n = _check.positive_int("workers", workers)
        executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="convomem-sqlite")
        try:
            loop = asyncio.get_running_loop()
            driver = await loop.run_in_executor(
                executor, functools.partial(SQLiteDriver, path, **options)
            )
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(driver, executor)

    async def _arun(self, call: SQLiteCall[T]) -> T:
        loop = asyncio.get_running_loop()
        driver = self._driver

        def attempt() -> asyncio.Future[T]:
            try:
                return loop.run_in_executor(self._executor, driver.attempt, call)
            except RuntimeError:  # the executor is shut down
                raise StoreError(f"{driver.where()}: the database is closed") from None

        result: T = await driver.retry.acall(attempt)
        return result

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> AsyncSQLiteSession:
        """The session ``session_id`` of ``tenant``, acting for ``user_id`` (no I/O)."""
        return AsyncSQLiteSession(self, check_session_key(session_id, user_id, tenant))

    async def _reclaim(self) -> None:
        """``SQLiteDriver.checkpoint`` off the event loop (after a delete, erasure, sweep)."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._driver.checkpoint)

    def stats(self) -> StoreStats:
        """Statements, write transactions and rows read since the database was opened."""
        return self._driver.stats()

    def close(self) -> None:
        """Wait for the running calls, then close every connection."""
        self._executor.shutdown(wait=True)
        self._driver.close()

    async def aclose(self) -> None:
        """``close`` without blocking the event loop."""
        await asyncio.get_running_loop().run_in_executor(None, self.close)


class AsyncSQLiteSession(SessionCalls, AsyncSessionAPI):
    """One session of an ``AsyncSQLiteDatabase`` (an ``AsyncSessionStore``); each method
    is the coroutine twin of ``SQLiteSession``'s."""

    __slots__ = ("_db",)

    def __init__(self, db: AsyncSQLiteDatabase, key: ops.Key) -> None:
        super().__init__(key)
        self._db = db

    async def _arun(self, call: SQLiteCall[T]) -> T:
        return await self._db._arun(call)

    def __repr__(self) -> str:
        return f"<AsyncSQLiteSession {self.session_id!r} of {self._db.url}>"
