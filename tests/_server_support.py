"""Helpers of the service tests (``tests/server``), importable by other rooms' tests."""

from __future__ import annotations

import asyncio

from convomem.server.keys import KeyStore
from convomem.stores import aopen_store


def create_key(store: str, tenant: str) -> str:
    """A new key of ``tenant`` in the store ``store`` names (as `convomem keys create`)."""

    async def run() -> str:
        db = await aopen_store(store)
        try:
            return (await KeyStore(db).create(tenant)).key
        finally:
            await db.aclose()

    return asyncio.run(run())
