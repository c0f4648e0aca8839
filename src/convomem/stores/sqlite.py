"""Durable sessions in SQLite (stdlib ``sqlite3``): the default store.

``open_store("sqlite:///chat.db")`` gives a ``SQLiteDatabase``; ``db.session("s1",
user_id="u1")`` a ``SQLiteSession`` (a ``SessionStore``). The semantics are the
backend-neutral ones of ``convomem.stores.database``; what is SQLite's own:

- **Connections.** One per thread (made on first use, closed with the database), in
  autocommit mode; writes run in ``BEGIN IMMEDIATE`` so a write never fails half-way on
  a lock upgrade. Safe across threads and across processes on one machine (not on a
  network file system, where SQLite's locks are not reliable).
- **The file** is in WAL mode (readers never block the writer), with ``busy_timeout``
  (default 5 s) for writers waiting for each other, ``synchronous=NORMAL`` (a process
  crash loses nothing committed; a power cut may lose the last transactions, never
  corrupt the file; pass ``synchronous="full"`` to fsync every commit) and
  ``secure_delete`` (erased data is overwritten, not left in free pages).
- **In memory** (``sqlite://``): a private database shared by every connection of this
  object (SQLite's ``memdb`` VFS), gone when it is closed.
- **Faults.** "database is locked" after the busy timeout is a ``TransientError``; each
  call is retried by the database's ``RetryPolicy`` (by default 3 attempts with jittered
  waits) before it is raised. Any other SQLite error is a ``StoreError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from ..retry import RetryPolicy
from . import _sqlite_ops as ops
from ._database_api import DatabaseAPI
from ._session_api import SessionAPI
from ._sqlite_calls import DatabaseCalls, SessionCalls, SQLiteCall, check_session_key
from ._sqlite_driver import SQLiteDriver
from .database import StoreKind, StoreStats, TTLPolicy

__all__ = ["SQLiteDatabase", "SQLiteSession"]

T = TypeVar("T")


class SQLiteDatabase(DatabaseCalls, DatabaseAPI):
    """Sessions in one SQLite file (or in memory). See the module docstring.

    ``path`` is the file (None: in memory). ``ttl`` (seconds, or a ``TTLPolicy``) and
    ``ttl_refresh`` (``"write"``, ``"read"`` or ``"never"``) set when sessions expire;
    ``busy_timeout`` (seconds) how long a writer waits for another; ``retry`` the
    ``RetryPolicy`` for transient failures; ``clock`` the time (epoch seconds) used for
    created/updated times and expiry. Prefer ``open_store(url)``.
    """

    kind: StoreKind = "sqlite"
    schema: str | None = None
    prefix: str | None = None

    def __init__(
        self,
        path: str | None = None,
        *,
        ttl: float | TTLPolicy | None = None,
        ttl_refresh: str = "write",
        busy_timeout: float = 5.0,
        synchronous: str = "normal",
        retry: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        url: str | None = None,
    ) -> None:
        self._driver = driver = SQLiteDriver(
            path,
            ttl=ttl,
            ttl_refresh=ttl_refresh,
            busy_timeout=busy_timeout,
            synchronous=synchronous,
            retry=retry,
            clock=clock,
            url=url,
        )
        self.path = driver.path
        self.url = driver.url
        self.ttl = driver.ttl

    def _run(self, call: SQLiteCall[T]) -> T:
        """``call`` under the retry policy, on this thread (``SQLiteDriver.run``)."""
        return self._driver.run(call)

    def _reclaim(self) -> None:
        """Empty the write-ahead log after a deletion (``SQLiteDriver.checkpoint``)."""
        self._driver.checkpoint()

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> SQLiteSession:
        """The session ``session_id`` of ``tenant``, acting for ``user_id`` (no I/O)."""
        return SQLiteSession(self, check_session_key(session_id, user_id, tenant))

    def stats(self) -> StoreStats:
        """Statements, write transactions and rows read since the database was opened."""
        return self._driver.stats()

    def close(self) -> None:
        """Close every connection (an in-memory database is gone after this)."""
        self._driver.close()


class SQLiteSession(SessionCalls, SessionAPI):
    """One session of a ``SQLiteDatabase`` (a ``SessionStore``); see
    ``convomem.stores.database`` for the semantics of each method."""

    __slots__ = ("_db",)

    def __init__(self, db: SQLiteDatabase, key: ops.Key) -> None:
        super().__init__(key)
        self._db = db

    def _run(self, call: SQLiteCall[T]) -> T:
        return self._db._driver.run(call)

    def __repr__(self) -> str:
        return f"<SQLiteSession {self.session_id!r} of {self._db.url}>"
