"""``--store URL``, the same for every command (``serve``, ``keys``, ``sessions``): given,
else ``$CONVOMEM_STORE``, else ``sqlite:///convomem.db`` in the working directory; the
database it names, opened and closed, with a password never shown."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from urllib.parse import unquote, urlsplit

from ..errors import ConfigError, ConvomemError, StoreError
from ..stores.database import StoreDatabase
from ..stores.url import DEFAULT_STORE, parse_store_url, redact_url

__all__ = ["ENV_STORE", "add_store_option", "opened", "store_url"]

ENV_STORE = "CONVOMEM_STORE"
"""Where ``--store`` comes from when it is not given."""

HELP = f"store URL (default: ${ENV_STORE}, else {DEFAULT_STORE})"


def add_store_option(p: argparse.ArgumentParser) -> None:
    """Add ``--store URL`` to a command's parser."""
    p.add_argument("--store", metavar="URL", default=None, help=HELP)


def store_url(args: argparse.Namespace) -> str:
    """The store URL a command works on: ``--store``, ``$CONVOMEM_STORE``, the default."""
    given: str | None = args.store
    return given or os.environ.get(ENV_STORE) or DEFAULT_STORE


@contextlib.contextmanager
def opened(args: argparse.Namespace, *, create: bool = False) -> Iterator[StoreDatabase]:
    """The database ``store_url(args)`` names, closed afterwards. A SQLite file that does
    not exist is refused unless ``create`` (a read never makes an empty database). An
    error that repeats the URL's password (a driver's message may) has it hidden."""
    from ..stores import open_store

    url = store_url(args)
    try:
        parsed = parse_store_url(url)
        path = parsed.path if parsed.scheme == "sqlite" else None
        if not create and path is not None and not os.path.exists(path):
            raise ConfigError(
                f"--store {redact_url(url)!r}: no such database file ({os.path.abspath(path)!r})"
            )
        db = open_store(url)
        try:
            yield db
        finally:
            db.close()
    except ConvomemError as exc:
        secrets = _secrets(url)
        text = str(exc)
        if any(s in text for s in secrets):
            for s in secrets:
                text = text.replace(s, "***")
            raise StoreError(text) from None
        raise


def _secrets(url: str) -> list[str]:
    """The password of ``url`` as written and decoded (none: empty)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return []
    if not password:
        return []
    return sorted({password, unquote(password)}, key=len, reverse=True)
