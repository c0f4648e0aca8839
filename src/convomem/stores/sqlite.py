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

import contextlib
import os
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import TypeVar

from .. import _check
from ..errors import ConfigError, StoreError, TransientError
from ..retry import RetryPolicy
from . import _sqlite_ops as ops
from ._session_api import SessionAPI
from ._sqlite_calls import (
    Call,
    SessionCalls,
    check_session_key,
    delete_session_call,
    erase_user_call,
    sessions_call,
    sweep_call,
    tenant_counts_call,
)
from .database import SessionInfo, StoreStats, TTLPolicy
from .sqlite_schema import configure, migrate

__all__ = ["SQLiteDatabase", "SQLiteSession"]

T = TypeVar("T")

_BUSY_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED (primary result codes)

# The process a connection belongs to, without a getpid() system call per operation: a
# forked child sees its own pid once, here, and makes its own connections.
_PID = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


class _Connections:
    """One connection per thread (and per process: a forked child makes its own)."""

    def __init__(self, target: str, *, memory: bool, busy_timeout: float, synchronous: str):
        self.target = target
        self.memory = memory
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous
        self.closed = False
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: weakref.WeakSet[ops.Conn] = weakref.WeakSet()
        self._done = [0, 0, 0]  # the counts of connections already gone
        self.anchor: ops.Conn | None = None  # keeps an in-memory database alive

    def get(self) -> ops.Conn:
        if self.closed:
            raise StoreError(f"{self.target}: the database is closed")
        conn: ops.Conn | None = getattr(self._local, "conn", None)
        if conn is not None and conn.pid == _PID[0]:
            return conn
        raw = sqlite3.connect(
            self.target,
            timeout=self.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            uri=self.memory,
        )
        try:
            configure(
                raw,
                busy_timeout=self.busy_timeout,
                synchronous=self.synchronous,
                wal=not self.memory,
            )
        except BaseException:
            raw.close()
            raise
        conn = ops.Conn(raw, _PID[0])
        weakref.finalize(conn, self._retire, conn.counts)
        with self._lock:
            self._open.add(conn)
        self._local.conn = conn
        return conn

    def _retire(self, counts: list[int]) -> None:
        with self._lock:
            for i, n in enumerate(counts):
                self._done[i] += n

    def stats(self) -> StoreStats:
        with self._lock:
            totals = list(self._done)
            for conn in list(self._open):
                for i, n in enumerate(conn.counts):
                    totals[i] += n
        return StoreStats(statements=totals[0], transactions=totals[1], rows_read=totals[2])

    def close(self) -> None:
        self.closed = True
        with self._lock:
            conns = list(self._open)
        pid = _PID[0]
        for conn in conns:
            if conn.pid == pid:  # a forked child leaves its parent's connections alone
                with conn.busy:  # an operation running on it (another thread) ends first
                    conn.raw.close()
        self.anchor = None


def _translate(exc: sqlite3.Error, where: str, busy_timeout: float) -> Exception:
    code = getattr(exc, "sqlite_errorcode", None)
    text = str(exc)
    if (isinstance(code, int) and code & 0xFF in _BUSY_CODES) or text in (
        "database is locked",
        "database table is locked",
    ):
        return TransientError(f"{where}: {text} (waited the busy timeout of {busy_timeout}s)")
    return StoreError(f"{where}: {type(exc).__name__}: {text}")


class SQLiteDatabase:
    """Sessions in one SQLite file (or in memory). See the module docstring.

    ``path`` is the file (None: in memory). ``ttl`` (seconds, or a ``TTLPolicy``) and
    ``ttl_refresh`` (``"write"``, ``"read"`` or ``"never"``) set when sessions expire;
    ``busy_timeout`` (seconds) how long a writer waits for another; ``retry`` the
    ``RetryPolicy`` for transient failures; ``clock`` the time (epoch seconds) used for
    created/updated times and expiry. Prefer ``open_store(url)``.
    """

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
        if path is not None and (not isinstance(path, str) or not path):
            raise ConfigError(f"path={path!r}: must be a file path or None (in memory)")
        if isinstance(ttl, TTLPolicy):
            if ttl_refresh != "write":
                raise ConfigError(
                    f"ttl_refresh={ttl_refresh!r}: give it inside the TTLPolicy passed as ttl"
                )
            self.ttl = ttl
        else:
            self.ttl = TTLPolicy(ttl, ttl_refresh)  # type: ignore[arg-type]
        timeout = _check.number("busy_timeout", busy_timeout, minimum=0.0)
        _check.one_of("synchronous", synchronous, ("normal", "full"))
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry={retry!r}: must be a RetryPolicy or None")
        self._retry = RetryPolicy() if retry is None else retry
        self._clock = _check.function("clock", clock, "() -> epoch seconds")
        memory = path is None
        self.path = path
        self.url = url or ("sqlite://" if memory else f"sqlite:///{path}")
        target = f"file:/convomem-{uuid.uuid4().hex}?vfs=memdb" if memory else path
        self._conns = _Connections(
            str(target), memory=memory, busy_timeout=timeout, synchronous=synchronous
        )
        self._retry.call(self._open)

    def _open(self) -> None:
        try:
            conn = self._conns.get()
            self._conns.anchor = conn
            migrate(conn.raw)
        except sqlite3.Error as exc:
            error = _translate(exc, self._where(), self._conns.busy_timeout)
            if self.path is not None and "unable to open" in str(exc):
                error = StoreError(
                    f"{error} (the file {os.path.abspath(self.path)!r}: does its directory "
                    "exist? sqlite:///name.db is relative to the working directory, "
                    "sqlite:////abs/path.db absolute)"
                )
            raise error from exc

    def _where(self) -> str:
        return "sqlite (in memory)" if self.path is None else f"sqlite file {self.path!r}"

    # -- the driver ------------------------------------------------------------------

    def _attempt(self, fn: Callable[[ops.Tx], T], write: bool) -> T:
        """One attempt of an operation on this thread's connection (held ``busy``)."""
        try:
            conn = self._conns.get()  # connecting may meet a lock too: inside the retry
        except sqlite3.Error as exc:
            raise _translate(exc, self._where(), self._conns.busy_timeout) from exc
        raw = conn.raw
        with conn.busy:
            try:
                tx = ops.Tx(conn, self._clock(), self.ttl)
                if not write:
                    return fn(tx)
                counts = conn.counts
                raw.execute("BEGIN IMMEDIATE")  # (conn.run, inlined: every write's path)
                counts[0] += 1
                result = fn(tx)
                raw.execute("COMMIT")
                counts[0] += 1
                counts[1] += 1
                return result
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):  # then SQLite has rolled back
                    if raw.in_transaction:
                        raw.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise _translate(exc, self._where(), self._conns.busy_timeout) from exc
                raise

    def _run(self, call: Call[T]) -> T:
        """``call`` under the retry policy. The first attempt runs bare: its bookkeeping
        (the attempts' clock included) starts only if it fails, which an append in a
        tight loop notices."""
        try:
            return self._attempt(call.fn, call.write)
        except Exception as first:
            error: Exception = first
        attempts = self._retry.attempts()
        while True:
            decision = attempts.failed(error)
            if not decision.retry:
                raise error
            time.sleep(decision.delay)
            try:
                return self._attempt(call.fn, call.write)
            except Exception as exc:
                error = exc

    # -- the database ----------------------------------------------------------------

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> SQLiteSession:
        """The session ``session_id`` of ``tenant``, acting for ``user_id`` (no I/O)."""
        return SQLiteSession(self, check_session_key(session_id, user_id, tenant))

    def sessions(
        self,
        *,
        user_id: str | None = None,
        tenant: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> tuple[list[SessionInfo], str | None]:
        """Sessions of ``tenant`` (of ``user_id`` when given), newest created first;
        pass the returned cursor back for the next page (None: no more)."""
        return self._run(sessions_call(user_id, tenant, cursor, limit))

    def tenant_counts(self, *, user_id: str | None = None) -> dict[str | None, int]:
        """Live sessions per tenant (``None``: no tenant), of ``user_id`` when given. It
        reads every session's record: for administration (``convomem sessions list``
        says where sessions are), not for a request path."""
        return self._run(tenant_counts_call(user_id))

    def delete_session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> bool:
        """Delete a session with its log, state and counts; whether it existed."""
        deleted = self._run(delete_session_call(session_id, user_id, tenant))
        self._checkpoint()
        return deleted

    def erase_user(self, user_id: str, *, tenant: str | None = None) -> int:
        """Delete every session ``user_id`` owns in ``tenant``; how many there were."""
        erased = self._run(erase_user_call(user_id, tenant))
        self._checkpoint()
        return erased

    def sweep(self) -> int:
        """Delete the expired sessions; how many."""
        swept = self._run(sweep_call())
        if swept:
            self._checkpoint()
        return swept

    def _checkpoint(self) -> None:
        """Fold the WAL into the file and empty it, so deleted data leaves no copy there
        (``secure_delete`` zeroes it in the file itself); after every delete, erasure or
        sweep. Best effort: a reader in another process can hold the WAL a while longer."""
        if self.path is not None:
            with contextlib.suppress(sqlite3.Error):
                conn = self._conns.get()
                with conn.busy:
                    conn.run("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def stats(self) -> StoreStats:
        """Statements, write transactions and rows read since the database was opened."""
        return self._conns.stats()

    def close(self) -> None:
        """Close every connection (an in-memory database is gone after this)."""
        self._conns.close()

    def __enter__(self) -> SQLiteDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SQLiteDatabase {self.url}>"


class SQLiteSession(SessionCalls, SessionAPI):
    """One session of a ``SQLiteDatabase`` (a ``SessionStore``); see
    ``convomem.stores.database`` for the semantics of each method."""

    __slots__ = ("_db",)

    def __init__(self, db: SQLiteDatabase, key: ops.Key) -> None:
        super().__init__(key)
        self._db = db

    def __repr__(self) -> str:
        return f"<SQLiteSession {self.session_id!r} of {self._db.url}>"
