"""What the client tests share: a service's address and keys (``Service``), keys made in
a store, and the settings of an app whose chat route calls the local fake upstream."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx

from _fake_upstream import FakeUpstream
from convomem.server import Settings
from convomem.server.keys import KeyStore
from convomem.stores import aopen_store


@dataclass
class Service:
    """Where a service answers and the keys of two tenants."""

    url: str
    key: str
    other_key: str
    upstream: FakeUpstream
    http: httpx.Client | None = None
    """An in-process app's client (``Client(http=...)``); None for a real process."""


async def _keys(store: str) -> tuple[str, str]:
    db = await aopen_store(store)
    try:
        keys = KeyStore(db)
        return (await keys.create("acme")).key, (await keys.create("globex")).key
    finally:
        await db.aclose()


def keys_of(store: str) -> tuple[str, str]:
    """A key of ``acme`` and one of ``globex`` in ``store`` (run outside any loop)."""
    return asyncio.run(_keys(store))


def settings(store: str, fake: FakeUpstream) -> Settings:
    return Settings(store=store, rate_per_second=0, upstream_url=fake.url, upstream_model="m")
