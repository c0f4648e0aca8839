"""Store URLs: which backend a URL names, and what it says to that backend.

``open_store(url)`` reads the scheme to pick a backend. This version builds SQLite and
Redis:

- ``sqlite:///relative/file.db`` and ``sqlite:////absolute/file.db`` (SQLAlchemy's
  spelling: three slashes then the path, so an absolute path shows four);
- ``sqlite://`` or ``sqlite:///:memory:``: a private in-memory database, shared by every
  connection of the one database object that opened it, gone when it is closed.

Query parameters carry backend options (``?busy_timeout=2.5&ttl=3600``); each backend
says which it knows, and an unknown one is an error naming it. Redis:
``redis://[user:password@]host:port/db``, ``rediss://`` (TLS) and
``redis+cluster://host:port`` (any node of a Redis Cluster; ``rediss+cluster://`` over
TLS). PostgreSQL
(``postgresql://``) is recognized and refused with an error saying it is not built yet
in this version.
A password in a URL is never repeated in an error message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

from ..errors import ConfigError

__all__ = ["BUILT_SCHEMES", "NOT_BUILT_SCHEMES", "StoreURL", "parse_store_url", "redact_url"]

BUILT_SCHEMES: Final = ("sqlite", "redis", "rediss", "redis+cluster", "rediss+cluster")
"""Schemes this version opens."""
NOT_BUILT_SCHEMES: Final = ("postgresql", "postgres")
"""Schemes of issue 9's other backends: recognized, and refused until they are built."""

_PASSWORD: Final = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://[^:/?#@]*):[^@/?#]*@")


def redact_url(url: str) -> str:
    """``url`` with the password of its user-info (``user:password@``) hidden."""
    return _PASSWORD.sub(r"\1:***@", url)


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A parsed store URL."""

    url: str
    """The URL as given (``str(parsed)`` shows it with the password hidden)."""
    scheme: str
    path: str | None
    """The SQLite file path; None for an in-memory database (and for other schemes)."""
    options: dict[str, str]
    """The query parameters, each given once."""

    def __str__(self) -> str:
        return redact_url(self.url)


def _supported() -> str:
    return (
        f"supported schemes: {', '.join(BUILT_SCHEMES)} "
        f"({', '.join(NOT_BUILT_SCHEMES)}: not built yet in this version)"
    )


def parse_store_url(url: object) -> StoreURL:
    """Parse ``url``; ``ConfigError`` naming the URL (password hidden) when it is not one
    this version opens."""
    if not isinstance(url, str):
        hint = " (a path? write it as 'sqlite:///' + path)" if hasattr(url, "__fspath__") else ""
        raise ConfigError(f"url={url!r}: must be a store URL string{hint}; {_supported()}")
    shown = redact_url(url)
    scheme, sep, _ = url.partition("://")
    scheme = scheme.lower()
    if not sep or not scheme:
        raise ConfigError(f"url={shown!r}: not a store URL (scheme://...); {_supported()}")
    if scheme in NOT_BUILT_SCHEMES:
        raise ConfigError(
            f"url={shown!r}: the {scheme!r} backend is not built yet in this version; "
            f"{_supported()}"
        )
    if scheme not in BUILT_SCHEMES:
        raise ConfigError(f"url={shown!r}: unknown scheme {scheme!r}; {_supported()}")
    parts = urlsplit(url)
    if parts.fragment:
        raise ConfigError(f"url={shown!r}: a store URL has no #fragment")
    if scheme != "sqlite":  # a server: the backend reads host, port, database, password
        return StoreURL(url, scheme, None, _query(shown, parts.query))
    if parts.netloc:
        raise ConfigError(
            f"url={shown!r}: a sqlite URL has no host ({parts.netloc!r}); write "
            "sqlite:///relative.db or sqlite:////absolute/path.db"
        )
    options = _query(shown, parts.query)
    raw = unquote(parts.path)
    path = raw[1:] if raw.startswith("/") else raw
    if "\x00" in path:
        raise ConfigError(f"url={shown!r}: the path contains a NUL character")
    return StoreURL(url, scheme, None if path in ("", ":memory:") else path, options)


def _query(shown: str, query: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key in options:
            raise ConfigError(f"url={shown!r}: the option {key!r} is given twice")
        options[key] = value
    return options
