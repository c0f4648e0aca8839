"""What the client tests share: a service's address and keys (``Service``), keys made in
a store, and the settings of an app whose chat route calls the local fake upstream."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from _fake_upstream import FakeUpstream
from _server_support import create_key
from convomem.server import Settings


@dataclass
class Service:
    """Where a service answers and the keys of two tenants."""

    url: str
    key: str
    other_key: str
    upstream: FakeUpstream
    http: httpx.Client | None = None
    """An in-process app's client (``Client(http=...)``); None for a real process."""


def keys_of(store: str) -> tuple[str, str]:
    """A key of ``acme`` and one of ``globex`` in ``store`` (run outside any loop)."""
    return create_key(store, "acme"), create_key(store, "globex")


def settings(store: str, fake: FakeUpstream) -> Settings:
    return Settings(store=store, rate_per_second=0, upstream_url=fake.url, upstream_model="m")
