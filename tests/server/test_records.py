"""``server._records``: the service's small records kept in the store database through
its public statement hook (``run_statements``, the statements by ``kind``), on every
backend; a database that is not an async store database is refused."""

from __future__ import annotations

from typing import Any

import pytest

from convomem.errors import ConfigError
from convomem.server._records import Records
from convomem.stores import aopen_store, open_store

BACKENDS = ["sqlite_file", "redis", "postgresql"]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest) -> str:
    backend: Any = request.getfixturevalue(request.param)
    made: str = backend.fresh_url()
    return made


class Forwarding:
    """An async store database of the caller's own over a real one: the records use what
    it says of itself and its hook, whatever its class or module."""

    def __init__(self, db: Any) -> None:
        self.inner, self.kind, self.runs = db, db.kind, 0

    async def run_statements(self, op: Any, *, write: bool = False) -> Any:
        self.runs += 1
        return await self.inner.run_statements(op, write=write)

    def __getattr__(self, name: str) -> Any:  # the rest of AsyncStoreDatabase
        return getattr(self.inner, name)


async def test_records_run_through_the_public_hook(url: str) -> None:
    db = await aopen_store(url)
    try:
        proxy = Forwarding(db)
        records = Records(proxy, "seam_test")
        await records.put("a/1", "one", 1.0)
        assert await records.add("a/1", "again", 2.0) is False
        assert await records.add("a/2", "two", 2.0) is True
        assert await records.add("b/1", "other", 2.0) is True
        assert (await records.get("a/1"), await records.get("zz")) == ("one", None)
        assert sorted(await records.values()) == ["one", "other", "two"]
        assert await records.drop("a/") == 2
        assert await records.delete("b/1") is True and await records.delete("b/1") is False
        assert await records.values() == []
        assert proxy.runs >= 10  # every read and write went through run_statements
    finally:
        await db.aclose()


def test_a_sync_database_or_another_object_is_refused() -> None:
    with open_store("sqlite://") as db, pytest.raises(ConfigError, match="aopen_store"):
        Records(db, "seam_test")
    with pytest.raises(ConfigError, match="aopen_store"):
        Records(object(), "seam_test")
