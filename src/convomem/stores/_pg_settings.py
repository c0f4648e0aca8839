"""What the sync and async PostgreSQL databases share beyond the statements: their
checked options (``Settings``), how a driver error becomes a convomem one
(``Settings.translate``), how one statement runs on a cursor (``perform``), the work
counters (``Counter``) and libpq's parameters.

Importing this module without ``psycopg`` raises ``ConfigError`` naming the extra to
install (``pip install 'convomem[postgresql]'``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from .. import _check, _io
from ..errors import ConfigError, StoreError, TransientError
from ..retry import RetryPolicy
from . import _pg_ops as ops
from ._pg_schema import quote_schema
from .database import StoreStats, TTLPolicy
from .statements import Q

try:
    import psycopg
    from psycopg.conninfo import make_conninfo
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
except ImportError as _missing:  # pragma: no cover - depends on the environment
    raise ConfigError(
        "the postgresql backend needs psycopg 3 and psycopg-pool: "
        "pip install 'convomem[postgresql]'"
    ) from _missing

__all__ = [
    "LIBPQ_OPTIONS",
    "AsyncConnectionPool",
    "ConnectionPool",
    "Counter",
    "PoolTimeout",
    "Settings",
    "conninfo_of",
    "perform",
    "psycopg",
]

LIBPQ_OPTIONS: Final = frozenset(
    {
        "host",
        "hostaddr",
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "sslcrl",
        "sslnegotiation",
        "channel_binding",
        "gssencmode",
        "application_name",
        "target_session_attrs",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
        "passfile",
        "service",
    }
)
"""Query parameters of a URL handed to libpq as they are."""

# SQLSTATEs a retry can cure: lock_not_available, serialization_failure,
# deadlock_detected, too_many_connections, and the server shutting down or starting.
_TRANSIENT: Final = frozenset({"55P03", "40001", "40P01", "53300", "57P01", "57P02", "57P03"})
# A connection refused with these words (no SQLSTATE is given then) is worth a retry.
_PASSING: Final = ("starting up", "shutting down", "too many", "recovery mode", "terminat")


class Settings:
    """The options of a database, checked once, shared by the sync and async twins."""

    def __init__(
        self,
        conninfo: Mapping[str, Any],
        *,
        schema: str = "public",
        ttl: float | TTLPolicy | None = None,
        ttl_refresh: str = "write",
        lock_timeout: float = 5.0,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
        url: str | None = None,
    ) -> None:
        if isinstance(ttl, TTLPolicy):
            if ttl_refresh != "write":
                raise ConfigError(
                    f"ttl_refresh={ttl_refresh!r}: give it inside the TTLPolicy passed as ttl"
                )
            self.ttl = ttl
        else:
            self.ttl = TTLPolicy(ttl, ttl_refresh)  # type: ignore[arg-type]
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry={retry!r}: must be a RetryPolicy or None")
        self.retry = RetryPolicy() if retry is None else retry
        self.clock = _check.function("clock", clock, "() -> epoch seconds")
        timeout = _check.number("lock_timeout", lock_timeout, minimum=0.0, low_open=True)
        self.lock_timeout = timeout
        self.lock_ms = max(1, round(timeout * 1000))
        self.pool_size = _check.positive_int("pool_size", pool_size)
        self.connect_timeout = _check.number(
            "connect_timeout", connect_timeout, minimum=0.0, low_open=True
        )
        self.schema_name = schema
        self.schema = quote_schema(schema)
        params = {k: v for k, v in conninfo.items() if v is not None}
        # libpq's connect_timeout is whole seconds, at least 2.
        params["connect_timeout"] = max(2, round(self.connect_timeout))
        self.conninfo = make_conninfo("", **params)
        shown = url or "postgresql://" + str(params.get("host", ""))
        self.url = shown
        self.where = f"postgresql {shown}"

    def tx(self) -> ops.Tx:
        return ops.Tx(self.schema, self.clock(), self.ttl, self.lock_ms)

    def translate(self, exc: BaseException) -> BaseException:
        """A driver's error as a convomem one (other errors as they are)."""
        if isinstance(exc, PoolTimeout):
            return TransientError(
                f"{self.where}: no connection within {self.connect_timeout}s "
                f"(pool_size={self.pool_size}; is the server up?): {exc}"
            )
        if not isinstance(exc, psycopg.Error):
            return exc
        state = exc.sqlstate
        text = str(exc).strip()
        name = type(exc).__name__
        if state == "55P03":
            return TransientError(
                f"{self.where}: the session is locked by another writer "
                f"(waited the lock_timeout of {self.lock_timeout}s): {text}"
            )
        connection = isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) and (
            state is None or state.startswith("08")
        )
        if connection and "FATAL:" in text and not any(m in text for m in _PASSING):
            # Refused by the server at connect time: a missing database or role, a failed
            # authentication. Trying again will not fix it.
            return StoreError(f"{self.where}: {name}: {text}")
        if connection or state in _TRANSIENT:
            return TransientError(f"{self.where}: {name}: {text}")
        return StoreError(f"{self.where}: {name}: {text}")


class Counter:
    """The work ``StoreStats`` reports, shared by every connection of a database."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts = [0, 0, 0]  # statements, transactions, rows read

    def add(self, statements: int = 0, transactions: int = 0, rows: int = 0) -> None:
        with self.lock:
            self.counts[0] += statements
            self.counts[1] += transactions
            self.counts[2] += rows

    def stats(self) -> StoreStats:
        with self.lock:
            s, t, r = self.counts
        return StoreStats(statements=s, transactions=t, rows_read=r)


def perform(cur: Any, counter: Counter, q: Q) -> _io.Gen[Any]:
    """Run one statement on ``cur`` and count it: the cursor's calls as ``_io.Call`` s,
    which the sync driver makes and the async one awaits (psycopg's async cursor has
    the same methods, as coroutines). What ``q.fetch`` asks for comes back."""
    fetch = q.fetch
    if fetch == "committed":
        counter.add(transactions=1)
        return None
    if fetch == "one_or_conflict":
        counter.add(statements=1)
        try:
            yield _io.call(cur.execute, q.sql, q.params)
        except psycopg.errors.UniqueViolation:
            return None
        return (yield _io.call(cur.fetchone))
    if fetch == "many":
        counter.add(statements=1)
        yield _io.call(cur.executemany, q.sql, q.params)
        return cur.rowcount
    yield _io.call(cur.execute, q.sql, q.params or None)
    if fetch == "run":
        counter.add(statements=1, transactions=q.sql == "COMMIT")
        return cur.rowcount
    if fetch == "one":
        row = yield _io.call(cur.fetchone)
        counter.add(statements=1, rows=row is not None)
        return row
    rows = yield _io.call(cur.fetchall)
    counter.add(statements=1, rows=len(rows))
    return rows


def conninfo_of(
    host: str | None,
    port: int | None,
    user: str | None,
    password: str | None,
    database: str | None,
    libpq: Mapping[str, str],
) -> dict[str, Any]:
    """libpq's connection parameters from a URL's parts."""
    out: dict[str, Any] = {
        "host": host,
        "port": port,
        "user": user,
        "password": password,
        "dbname": database,
    }
    for name, value in libpq.items():
        if name not in LIBPQ_OPTIONS:
            raise ConfigError(f"{name}={value!r}: not a libpq option this backend passes on")
        out[name] = value
    return out
