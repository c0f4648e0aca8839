"""Durable sessions in PostgreSQL (``psycopg`` 3 with a ``psycopg_pool`` pool).

``open_store("postgresql://user:password@host:5432/app")`` gives a
``PostgresDatabase``; ``db.session("s1", user_id="u1")`` a ``PostgresSession`` (a
``SessionStore``). The semantics are the backend-neutral ones of
``convomem.stores.database``; what is PostgreSQL's own:

- **Connections**: the one that migrated the schema at open stays as a spare, used by
  one call at a time; calls that overlap it take one from a pool (``pool_size``, default
  10, opened on demand). All in autocommit mode; writes open their own transaction
  (``BEGIN; SET LOCAL lock_timeout``). No statement is prepared on the server
  (``prepare_threshold=None``) and no session-level setting is relied on, so PgBouncer
  in transaction mode works. A child forked with the database open makes its own.
- **One round trip per call** in the common cases: a read is one statement (the
  session's row joined to the page of its log), an append of new messages one call of
  the server-side function ``convomem_append`` (``convomem.stores._pg_schema``).
- **Scope.** Every statement names the tenant; messages are reached only through the
  session row of that tenant. ``?schema=name`` keeps convomem's tables in a schema of
  their own (created when missing).
- **Erasure.** ``erase_user``, ``delete_session`` and ``sweep`` delete the rows at once
  (invisible to every reader); PostgreSQL reclaims their space at the next ``VACUUM``
  (autovacuum), so run ``VACUUM`` when erased data must also leave the disk now.
- **Faults.** A lock held past ``lock_timeout`` (default 5 s), a serialization failure,
  a deadlock, a dropped or refused connection and an exhausted pool are a
  ``TransientError``; each call is retried by the database's ``RetryPolicy`` (by default
  3 attempts with jittered waits) before it is raised. Any other database error is a
  ``StoreError``. The password is never shown (``url`` and errors hide it).

Options of the URL's query (``?schema=app&lock_timeout=2``): ``schema``,
``lock_timeout``, ``pool_size``, ``connect_timeout``, ``ttl``, ``ttl_refresh``; libpq's
own connection parameters (``sslmode``, ``host`` for a Unix socket,
``application_name``, ...) pass through to libpq.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from .. import _io
from ..errors import StoreError
from . import _pg_ops as ops
from ._database_api import DatabaseAPI
from ._pg_calls import DatabaseCalls, PgCall, SessionCalls, check_session_key
from ._pg_schema import migrate
from ._pg_settings import (
    LIBPQ_OPTIONS,
    ConnectionPool,
    Counter,
    Settings,
    perform,
    psycopg,
)
from ._session_api import SessionAPI
from .database import StoreKind, StoreStats, TTLPolicy

__all__ = ["LIBPQ_OPTIONS", "PostgresDatabase", "PostgresSession"]

T = TypeVar("T")


class PostgresDatabase(DatabaseCalls, DatabaseAPI):
    """Sessions in one PostgreSQL database (in one of its schemas). See the module
    docstring; prefer ``open_store(url)``.

    ``conninfo`` holds libpq's parameters (``host``, ``port``, ``user``, ``password``,
    ``dbname``, ...). ``schema`` (default ``public``) the schema of convomem's tables;
    ``ttl`` (seconds, or a ``TTLPolicy``) and ``ttl_refresh`` when sessions expire;
    ``lock_timeout`` (seconds) how long a writer waits for another; ``pool_size`` the
    most connections; ``connect_timeout`` (seconds) how long to wait for one; ``retry``
    the ``RetryPolicy`` for transient failures; ``clock`` the time (epoch seconds).
    """

    kind: StoreKind = "postgresql"
    prefix: str | None = None

    def __init__(self, conninfo: Mapping[str, Any], **options: Any) -> None:
        self._settings = Settings(conninfo, **options)
        s = self._settings
        self.url: str = s.url
        self.ttl: TTLPolicy = s.ttl
        self.schema: str | None = s.schema
        self._retry = s.retry
        self._counter = Counter()
        self._closed = False
        self._pid = os.getpid()
        self._inherited: list[Any] = []
        self._spare: psycopg.Connection[Any] | None = None
        self._spare_lock = threading.Lock()
        self._pool = self._new_pool()
        self._retry.call(self._open)
        self._pool.open(wait=False)

    def _new_pool(self) -> ConnectionPool[Any]:
        s = self._settings
        return ConnectionPool(
            s.conninfo,
            min_size=0,  # the spare connection serves one caller at a time
            max_size=s.pool_size,
            kwargs={"autocommit": True, "prepare_threshold": None},
            timeout=s.connect_timeout,
            open=False,
            name="convomem",
        )

    def _pool_here(self) -> ConnectionPool[Any]:
        """The pool of this process: a child forked with the database open gets its own
        (the parent's connections are kept, never used nor closed, in the child)."""
        if self._pid != os.getpid():
            self._inherited += [self._pool, self._spare]
            self._spare = None
            self._pool = self._new_pool()
            self._pid = os.getpid()
            self._pool.open(wait=False)
        return self._pool

    def _open(self) -> None:
        """Connect (a clear error when that fails) and migrate; the connection stays as
        the spare, so a database opened to serve one call connects once."""
        s = self._settings
        try:
            conn = psycopg.connect(s.conninfo, autocommit=True, prepare_threshold=None)
            try:
                self._drive(conn, migrate(s.schema, s.schema_name))
            except BaseException:
                conn.close()
                raise
        except BaseException as exc:
            raise s.translate(exc) from exc
        self._spare = conn

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The spare connection when it is free, else one of the pool."""
        pool = self._pool_here()
        with self._spare_lock:
            conn, self._spare = self._spare, None
        if conn is None or conn.closed:
            with pool.connection() as pooled:
                yield pooled
            return
        try:
            yield conn
        finally:
            idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            if idle and not self._closed:
                with self._spare_lock:
                    if self._spare is None:
                        self._spare, conn = conn, None
            if conn is not None:
                conn.close()

    # -- the driver ------------------------------------------------------------------

    def _drive(self, conn: psycopg.Connection[Any], gen: ops.Op) -> Any:
        counter = self._counter
        cur = conn.cursor()

        try:
            return _io.drive(gen, lambda q: _io.run(perform(cur, counter, q)))
        except BaseException:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
            raise

    def _attempt(self, call: PgCall[T]) -> T:
        s = self._settings
        tx = s.tx()
        try:
            with self._connection() as conn:
                result: T = self._drive(conn, call.fn(tx))
                return result
        except BaseException as exc:
            error = s.translate(exc)
            if error is exc:
                raise
            raise error from exc

    def _run(self, call: PgCall[T]) -> T:
        if self._closed:
            raise StoreError(f"{self._settings.where}: the database is closed")
        result: T = self._retry.call(self._attempt, call)
        return result

    # -- the database ----------------------------------------------------------------

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> PostgresSession:
        """The session ``session_id`` of ``tenant``, acting for ``user_id`` (no I/O)."""
        return PostgresSession(self, check_session_key(session_id, user_id, tenant))

    def stats(self) -> StoreStats:
        """Statements, write transactions and rows read since the database was opened."""
        return self._counter.stats()

    def close(self) -> None:
        """Close every connection of the pool (in a forked child, only its own)."""
        self._closed = True
        if self._pid == os.getpid():
            with self._spare_lock:
                spare, self._spare = self._spare, None
            if spare is not None:
                spare.close()
            self._pool.close()


class PostgresSession(SessionCalls, SessionAPI):
    """One session of a ``PostgresDatabase`` (a ``SessionStore``); see
    ``convomem.stores.database`` for the semantics of each method."""

    __slots__ = ("_db",)

    def __init__(self, db: PostgresDatabase, key: ops.Key) -> None:
        super().__init__(key)
        self._db = db

    def _run(self, op: PgCall[T]) -> T:
        return self._db._run(op)

    def __repr__(self) -> str:
        return f"<PostgresSession {self.session_id!r} of {self._db.url}>"
