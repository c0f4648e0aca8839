"""Store URLs: which backend a URL names, and what it says to that backend.

``open_store(url)`` reads the scheme to pick a backend. This version builds SQLite,
Redis and PostgreSQL:

- ``sqlite:///relative/file.db`` and ``sqlite:////absolute/file.db`` (SQLAlchemy's
  spelling: three slashes then the path, so an absolute path shows four);
- ``sqlite://`` or ``sqlite:///:memory:``: a private in-memory database, shared by every
  connection of the one database object that opened it, gone when it is closed.

Query parameters carry backend options (``?busy_timeout=2.5&ttl=3600``); each backend
says which it knows, and an unknown one is an error naming it. Redis:
``redis://[user:password@]host:port/db``, ``rediss://`` (TLS) and
``redis+cluster://host:port`` (any node of a Redis Cluster; ``rediss+cluster://`` over
TLS).
A password in a URL is never repeated in an error message.

PostgreSQL: ``postgresql://user:password@host:port/database?schema=app`` (or
``postgres://``), libpq's URL; ``host``, ``port``, ``user``, ``password`` and
``database`` are parsed here (percent-decoded), the query parameters are the backend's
options (``convomem.stores.postgres``). A Unix socket is ``?host=/run/postgresql``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

from ..errors import ConfigError

__all__ = ["BUILT_SCHEMES", "DEFAULT_STORE", "StoreURL", "parse_store_url", "redact_url"]

BUILT_SCHEMES: Final = (
    "sqlite",
    "redis",
    "rediss",
    "redis+cluster",
    "rediss+cluster",
    "postgresql",
    "postgres",
)
"""Schemes this version opens."""

DEFAULT_STORE: Final = "sqlite:///convomem.db"
"""The store of every command (``serve``, ``keys``, ``sessions``) given no ``--store``
and no ``$CONVOMEM_STORE``, and of ``Settings()``: a SQLite file in the working
directory, nothing to install."""

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
    host: str | None = None
    """PostgreSQL: the server's host name or address (None: libpq's default)."""
    port: int | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    database: str | None = None

    def __str__(self) -> str:
        return redact_url(self.url)

    def __repr__(self) -> str:
        return f"StoreURL({str(self)!r})"


def _supported() -> str:
    return f"supported schemes: {', '.join(BUILT_SCHEMES)}"


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
    if scheme not in BUILT_SCHEMES:
        raise ConfigError(f"url={shown!r}: unknown scheme {scheme!r}; {_supported()}")
    parts = urlsplit(url)
    if parts.fragment:
        raise ConfigError(f"url={shown!r}: a store URL has no #fragment")
    options: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if key in options:
            raise ConfigError(f"url={shown!r}: the option {key!r} is given twice")
        options[key] = value
    if scheme in ("postgresql", "postgres"):
        return _postgres(url, shown, scheme, parts.path, options)
    if scheme != "sqlite":  # Redis: the backend reads host, port, database, password
        return StoreURL(url, scheme, None, options)
    if parts.netloc:
        raise ConfigError(
            f"url={shown!r}: a sqlite URL has no host ({parts.hostname or ''!r}); write "
            "sqlite:///relative.db or sqlite:////absolute/path.db"
        )
    raw = unquote(parts.path)
    path = raw[1:] if raw.startswith("/") else raw
    if "\x00" in path:
        raise ConfigError(f"url={shown!r}: the path contains a NUL character")
    return StoreURL(url, scheme, None if path in ("", ":memory:") else path, options)


def _postgres(url: str, shown: str, scheme: str, path: str, options: dict[str, str]) -> StoreURL:
    """A PostgreSQL URL: its user-info, host, port and database, percent-decoded."""
    netloc = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0]
    userinfo, at, hostport = netloc.rpartition("@")
    user = password = None
    if at:
        name, colon, secret = userinfo.partition(":")
        user = unquote(name) or None
        password = unquote(secret) if colon else None
    host, port_text = hostport, ""
    if hostport.startswith("["):  # an IPv6 address: [::1]:5432
        host, _, rest = hostport[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif ":" in hostport:
        host, _, port_text = hostport.partition(":")
    port = None
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ConfigError(f"url={shown!r}: the port {port_text!r} is not a port number")
        port = int(port_text)
    database = unquote(path[1:] if path.startswith("/") else path) or None
    for what, value in (("user", user), ("host", host), ("database", database)):
        if value is not None and "\x00" in value:
            raise ConfigError(f"url={shown!r}: the {what} contains a NUL character")
    return StoreURL(
        url, scheme, None, options, unquote(host) or None, port, user, password, database
    )
