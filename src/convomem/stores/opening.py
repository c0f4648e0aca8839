"""``open_store(url)`` and ``aopen_store(url)``: a store database from its URL.

Options come as keywords or as the URL's query parameters (``?ttl=3600``), not both for
the same option. Options every backend takes: ``ttl`` (seconds; None: sessions never
expire), ``ttl_refresh`` (``"write"``, ``"read"`` or ``"never"``), ``retry`` (a
``RetryPolicy`` for transient failures) and ``clock`` (epoch seconds, for tests). SQLite
adds ``busy_timeout`` (seconds, default 5) and ``synchronous`` (``"normal"`` or
``"full"``); the async twin ``workers`` (threads, default 4). Redis adds ``prefix`` (of
every key, default ``convomem``), ``socket_timeout`` (seconds, default 5) and, for TLS,
``ssl_ca_certs`` (the CA file that signed the server's certificate; the system's CAs by
default). A backend is imported only when a URL names it.
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
}


def _options(parsed: StoreURL, given: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    """The keywords given (None: not given) merged with the URL's query parameters."""
    out = {k: v for k, v in given.items() if v is not None}
    for name, value in out.items():
        if name not in known:
            usable = sorted(k for k in known if k != "url")
            raise ConfigError(
                f"{name}={value!r}: not an option of the {parsed.scheme} backend; "
                f"known: {', '.join(usable)}"
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
) -> StoreDatabase:
    """Open the store database ``url`` names (see ``convomem.stores.url``), creating and
    migrating it when needed; ``ConfigError`` naming the URL for a scheme this version
    does not build."""
    parsed = parse_store_url(url)
    given = {
        "ttl": ttl,
        "ttl_refresh": ttl_refresh,
        "busy_timeout": busy_timeout,
        "synchronous": synchronous,
        "retry": retry,
        "clock": clock,
        "prefix": prefix,
        "socket_timeout": socket_timeout,
        "ssl_ca_certs": ssl_ca_certs,
    }
    if parsed.scheme in _REDIS_SCHEMES:
        from .redis_store import RedisDatabase

        return RedisDatabase(parsed.url, **_options(parsed, given, _REDIS))
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
        "prefix": prefix,
        "socket_timeout": socket_timeout,
        "ssl_ca_certs": ssl_ca_certs,
    }
    if parsed.scheme in _REDIS_SCHEMES:
        from .redis_async import AsyncRedisDatabase

        options = _options(parsed, given, (*_REDIS, "workers"))
        redis_db: AsyncStoreDatabase = await AsyncRedisDatabase.open(parsed.url, **options)
        return redis_db
    from .sqlite_async import AsyncSQLiteDatabase

    options = _options(parsed, given, (*_SQLITE, "workers"))
    return await AsyncSQLiteDatabase.open(parsed.path, url=str(parsed), **options)
