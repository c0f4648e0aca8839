"""The SQLite driver both SQLite databases share: connections, one attempt of a call,
the retries, the WAL checkpoint.

``SQLiteDatabase`` runs a call on the calling thread (``run``: ``attempt`` under the
retry policy); ``AsyncSQLiteDatabase`` runs each ``attempt`` in a worker thread and
waits out the retries with ``asyncio.sleep``. The options are checked once, here, so the
twins open a file the same way.
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
from ._sqlite_calls import SQLiteCall
from .database import StoreStats, TTLPolicy
from .sqlite_schema import configure, migrate

__all__ = ["SQLiteDriver"]

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


class SQLiteDriver:
    """One SQLite file (or in-memory database) with its connections and options (see
    ``SQLiteDatabase`` for them); opens and migrates it on construction."""

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
        self.retry = RetryPolicy() if retry is None else retry
        self.clock = _check.function("clock", clock, "() -> epoch seconds")
        memory = path is None
        self.path = path
        self.url = url or ("sqlite://" if memory else f"sqlite:///{path}")
        target = f"file:/convomem-{uuid.uuid4().hex}?vfs=memdb" if memory else path
        self.conns = _Connections(
            str(target), memory=memory, busy_timeout=timeout, synchronous=synchronous
        )
        self.retry.call(self._open)

    def _open(self) -> None:
        try:
            conn = self.conns.get()
            self.conns.anchor = conn
            migrate(conn.raw)
        except sqlite3.Error as exc:
            error = _translate(exc, self.where(), self.conns.busy_timeout)
            if self.path is not None and "unable to open" in str(exc):
                error = StoreError(
                    f"{error} (the file {os.path.abspath(self.path)!r}: does its directory "
                    "exist? sqlite:///name.db is relative to the working directory, "
                    "sqlite:////abs/path.db absolute)"
                )
            raise error from exc

    def where(self) -> str:
        """The database, as error messages name it."""
        return "sqlite (in memory)" if self.path is None else f"sqlite file {self.path!r}"

    def attempt(self, call: SQLiteCall[T]) -> T:
        """One attempt of ``call`` on this thread's connection (held ``busy``), inside a
        write transaction when it writes; SQLite's errors translated."""
        try:
            conn = self.conns.get()  # connecting may meet a lock too: inside the retry
        except sqlite3.Error as exc:
            raise _translate(exc, self.where(), self.conns.busy_timeout) from exc
        raw = conn.raw
        with conn.busy:
            try:
                tx = ops.Tx(conn, self.clock(), self.ttl)
                if not call.write:
                    return call.fn(tx)
                counts = conn.counts
                raw.execute("BEGIN IMMEDIATE")  # (conn.run, inlined: every write's path)
                counts[0] += 1
                result = call.fn(tx)
                raw.execute("COMMIT")
                counts[0] += 1
                counts[1] += 1
                return result
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):  # then SQLite has rolled back
                    if raw.in_transaction:
                        raw.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise _translate(exc, self.where(), self.conns.busy_timeout) from exc
                raise

    def run(self, call: SQLiteCall[T]) -> T:
        """``call`` under the retry policy, on the calling thread. The first attempt runs
        bare: its bookkeeping (the attempts' clock included) starts only if it fails,
        which an append in a tight loop notices."""
        try:
            return self.attempt(call)
        except Exception as first:
            error: Exception = first
        attempts = self.retry.attempts()
        while True:
            decision = attempts.failed(error)
            if not decision.retry:
                raise error
            time.sleep(decision.delay)
            try:
                return self.attempt(call)
            except Exception as exc:
                error = exc

    def checkpoint(self) -> None:
        """Fold the WAL into the file and empty it, so erased data leaves no copy there
        (best effort: a reader in another process can hold the WAL a while longer)."""
        if self.path is not None:
            with contextlib.suppress(sqlite3.Error):
                conn = self.conns.get()
                with conn.busy:
                    conn.run("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def stats(self) -> StoreStats:
        """Statements, write transactions and rows read since the database was opened."""
        return self.conns.stats()

    def close(self) -> None:
        """Close every connection (an in-memory database is gone after this)."""
        self.conns.close()
