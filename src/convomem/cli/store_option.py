"""``--store URL`` for the ``convomem sessions`` commands: the database it names,
opened and closed, with a password never shown."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from urllib.parse import unquote, urlsplit

from ..errors import ConfigError, ConvomemError, StoreError
from ..stores.database import StoreDatabase
from ..stores.url import parse_store_url, redact_url

__all__ = ["ENV_STORE", "opened"]

ENV_STORE = "CONVOMEM_STORE"
"""Where ``--store`` comes from when it is not given."""


@contextlib.contextmanager
def opened(args: argparse.Namespace, *, create: bool = False) -> Iterator[StoreDatabase]:
    """The database ``--store`` names, closed afterwards. An error that repeats the
    URL's password (a driver's message may) has it hidden."""
    from ..stores import open_store

    url: str | None = args.store or os.environ.get(ENV_STORE) or None
    if url is None:
        raise ConfigError(
            f"--store: required (a store URL such as sqlite:///sessions.db), or set ${ENV_STORE}"
        )
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
