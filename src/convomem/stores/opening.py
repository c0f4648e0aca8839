"""``open_store(url)`` and ``aopen_store(url)``: a store database from its URL.

Options come as keywords or as the URL's query parameters (``?ttl=3600``), not both for
the same option. Options every backend takes: ``ttl`` (seconds; None: sessions never
expire), ``ttl_refresh`` (``"write"``, ``"read"`` or ``"never"``), ``retry`` (a
``RetryPolicy`` for transient failures) and ``clock`` (epoch seconds, for tests). SQLite
adds ``busy_timeout`` (seconds, default 5) and ``synchronous`` (``"normal"`` or
``"full"``); the async twin ``workers`` (threads, default 4). Redis adds ``prefix`` (of
every key, default ``convomem``), ``socket_timeout`` (seconds, default 5) and, for TLS,
``ssl_ca_certs`` (the CA file that signed the server's certificate; the system's CAs by
default). PostgreSQL adds ``schema``, ``lock_timeout`` (seconds, default 5), ``pool_size``
(connections, default 10; ``workers`` is the async twin's other name for it) and
``connect_timeout`` (seconds, default 10), and passes libpq's parameters (``sslmode``,
...) through. An option another backend takes is an error naming it. A backend is
imported only when a URL names it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ..errors import ConfigError
from ..retry import RetryPolicy
from .database import AsyncStoreDatabase, StoreDatabase, TTLPolicy
from .url import StoreURL, parse_store_url

__all__ = ["aopen_store", "open_store"]

_FROM_TEXT: Final[dict[str, Callable[[str], Any]]] = {
    "ttl": float,
    "ttl_refresh": str,
    "busy_timeout": float,
    "synchronous": str,
    "workers": int,
    "prefix": str,
    "socket_timeout": float,
    "ssl_ca_certs": str,
    "schema": str,
    "lock_timeout": float,
    "pool_size": int,
    "connect_timeout": float,
}


def _options(parsed: StoreURL, given: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    """The keywords given (None: not given) merged with the URL's query parameters."""
    out = {k: v for k, v in given.items() if v is not None}
    for name, value in out.items():
        if name not in known:
            raise ConfigError(
                f"{name}={value!r}: not an option of the {parsed.scheme} backend ({parsed})"
            )
    for name, text in parsed.options.items():
        if name not in known or name not in _FROM_TEXT:
            usable = sorted(k for k in known if k in _FROM_TEXT)
            raise ConfigError(
                f"url={str(parsed)!r}: unknown option {name!r} for the {parsed.scheme} "
                f"backend; known: {', '.join(usable)}"
            )
        if name in out:
            raise ConfigError(
                f"{name}={out[name]!r}: also given in url={str(parsed)!r}; give it once"
            )
        try:
            out[name] = _FROM_TEXT[name](text)
        except ValueError:
            raise ConfigError(f"url={str(parsed)!r}: {name}={text!r} is not valid") from None
    return out


_SQLITE: Final = ("ttl", "ttl_refresh", "busy_timeout", "synchronous", "retry", "clock")
_REDIS: Final = (
    "ttl",
    "ttl_refresh",
    "prefix",
    "socket_timeout",
    "ssl_ca_certs",
    "retry",
    "clock",
)
_REDIS_SCHEMES: Final = ("redis", "rediss", "redis+cluster", "rediss+cluster")
_POSTGRES: Final = (
    "ttl",
    "ttl_refresh",
    "retry",
    "clock",
    "schema",
    "lock_timeout",
    "pool_size",
    "connect_timeout",
)


def _postgres_options(
    parsed: StoreURL, given: dict[str, Any], known: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """libpq's connection parameters and the backend's options of a PostgreSQL URL."""
    from ._pg_settings import LIBPQ_OPTIONS, conninfo_of

    libpq = {k: v for k, v in parsed.options.items() if k in LIBPQ_OPTIONS}
    ours = {k: v for k, v in parsed.options.items() if k not in LIBPQ_OPTIONS}
    mine = StoreURL(parsed.url, parsed.scheme, None, ours)
    options = _options(mine, given, known)
    conninfo = conninfo_of(
        parsed.host, parsed.port, parsed.user, parsed.password, parsed.database, libpq
    )
    return conninfo, options


def open_store(
    url: str,
    *,
    ttl: float | TTLPolicy | None = None,
    ttl_refresh: str | None = None,
    busy_timeout: float | None = None,
    synchronous: str | None = None,
    retry: RetryPolicy | None = None,
    clock: Callable[[], float] | None = None,
    prefix: str | None = None,
    socket_timeout: float | None = None,
    ssl_ca_certs: str | None = None,
    schema: str | None = None,
    lock_timeout: float | None = None,
    pool_size: int | None = None,
    connect_timeout: float | None = None,
) -> StoreDatabase:
    """Open the store database ``url`` names (see ``convomem.stores.url``), creating and
    migrating it when needed; ``ConfigError`` naming the URL for an unknown scheme and
    naming the option for one its backend does not take (see the module docstring)."""
    parsed = parse_store_url(url)
    given = {
        "ttl": ttl,
        "ttl_refresh": ttl_refresh,
        "busy_timeout": busy_timeout,
        "synchronous": synchronous,
        "retry": retry,
        "clock": clock,
        "schema": schema,
        "lock_timeout": lock_timeout,
        "pool_size": pool_size,
        "connect_timeout": connect_timeout,
        "prefix": prefix,
        "socket_timeout": socket_timeout,
        "ssl_ca_certs": ssl_ca_certs,
    }
    if parsed.scheme in _REDIS_SCHEMES:
        from .redis_store import RedisDatabase

        return RedisDatabase(parsed.url, **_options(parsed, given, _REDIS))
    if parsed.scheme in ("postgresql", "postgres"):
        from .postgres import PostgresDatabase

        conninfo, options = _postgres_options(parsed, given, _POSTGRES)
        return PostgresDatabase(conninfo, url=str(parsed), **options)
    from .sqlite import SQLiteDatabase

    return SQLiteDatabase(parsed.path, url=str(parsed), **_options(parsed, given, _SQLITE))


async def aopen_store(
    url: str,
    *,
    ttl: float | TTLPolicy | None = None,
    ttl_refresh: str | None = None,
    busy_timeout: float | None = None,
    synchronous: str | None = None,
    retry: RetryPolicy | None = None,
    clock: Callable[[], float] | None = None,
    workers: int | None = None,
    prefix: str | None = None,
    socket_timeout: float | None = None,
    ssl_ca_certs: str | None = None,
    schema: str | None = None,
    lock_timeout: float | None = None,
    pool_size: int | None = None,
    connect_timeout: float | None = None,
) -> AsyncStoreDatabase:
    """The async twin of ``open_store``: an ``AsyncStoreDatabase``, opened without
    blocking the event loop."""
    parsed = parse_store_url(url)
    given = {
        "ttl": ttl,
        "ttl_refresh": ttl_refresh,
        "busy_timeout": busy_timeout,
        "synchronous": synchronous,
        "retry": retry,
        "clock": clock,
        "workers": workers,
        "schema": schema,
        "lock_timeout": lock_timeout,
        "pool_size": pool_size,
        "connect_timeout": connect_timeout,
        "prefix": prefix,
        "socket_timeout": socket_timeout,
        "ssl_ca_certs": ssl_ca_certs,
    }
    if parsed.scheme in _REDIS_SCHEMES:
        from .redis_async import AsyncRedisDatabase

        options = _options(parsed, given, (*_REDIS, "workers"))
        redis_db: AsyncStoreDatabase = await AsyncRedisDatabase.open(parsed.url, **options)
        return redis_db
    if parsed.scheme in ("postgresql", "postgres"):
        from .postgres_async import AsyncPostgresDatabase

        if workers is not None:
            if pool_size is not None:
                raise ConfigError(f"workers={workers!r}: the same as pool_size=; give one")
            given["pool_size"] = given.pop("workers")
        conninfo, options = _postgres_options(parsed, given, _POSTGRES)
        return await AsyncPostgresDatabase.open(conninfo, url=str(parsed), **options)
    from .sqlite_async import AsyncSQLiteDatabase

    options = _options(parsed, given, (*_SQLITE, "workers"))
    return await AsyncSQLiteDatabase.open(parsed.path, url=str(parsed), **options)
