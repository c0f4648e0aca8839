"""The per-user facts table of a RecallIndex (SQLite and PostgreSQL): facts shared by a
user's sessions, compare-and-set saves, scope, erasure by the index and by the store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from convomem.errors import ConcurrentUpdate, ConfigError
from convomem.model import Message
from convomem.recall import AsyncRecallIndex, RecallIndex
from convomem.stores import aopen_store, open_store
from convomem.summaries.supersession import FactHistory

RECALL_BACKENDS = ["sqlite_memory", "postgresql"]


@pytest.fixture(params=RECALL_BACKENDS)
def fresh_url(request: pytest.FixtureRequest) -> Callable[[], str]:
    url: Callable[[], str] = request.getfixturevalue(request.param).fresh_url
    return url


def said(mid: str, text: str, at: float) -> Message:
    return Message(mid, "user", content=text, created_at=at)


def test_facts_round_trip_supersession_and_scope(fresh_url: Callable[[], str]) -> None:
    with open_store(fresh_url()) as db, RecallIndex(db) as idx:
        h = idx.facts("ana")
        assert h.version == 0 and len(h) == 0
        h.add_messages([said("m1", "I live in Lisbon.", 1000.0)], session_id="s1")
        assert idx.save_facts("ana", h, expected_version=h.version) == 1
        h2 = idx.facts("ana")
        h2.add_messages([said("m2", "I moved to Porto.", 2000.0)], session_id="s2")
        idx.save_facts("ana", h2, expected_version=h2.version)
        again = idx.facts("ana")
        assert again.version == 2
        assert {f.value for f in again.current()} == {"Porto"}
        old = [f.value for f in again.history("city")]
        assert old == ["Lisbon", "Porto"]  # "what was my old address?"
        assert "m1" in again and "m2" in again  # read once: no session re-extracts them
        assert idx.facts("bob").version == 0  # another user: nothing
        assert idx.facts("ana", tenant="t2").version == 0  # another tenant: nothing
        assert idx.facts_version("ana") == 2 and idx.facts_version("bob") == 0
        assert idx.facts_version("ana", tenant="t2") == 0


def test_save_is_compare_and_set(fresh_url: Callable[[], str]) -> None:
    with open_store(fresh_url()) as db, RecallIndex(db) as idx:
        a, b = idx.facts("ana"), idx.facts("ana")
        a.add_messages([said("m1", "I live in Lisbon.", 1.0)])
        idx.save_facts("ana", a, expected_version=0)
        b.add_messages([said("m2", "My name is Ana.", 2.0)])
        with pytest.raises(ConcurrentUpdate) as err:
            idx.save_facts("ana", b, expected_version=0)
        assert err.value.actual == 1
        assert {f.value for f in idx.facts("ana").current()} == {"Lisbon"}  # nothing written
        with pytest.raises(ConcurrentUpdate):
            idx.save_facts("ana", b, expected_version=5)
        assert idx.save_facts("ana", b) == 2  # no expected version: last writer wins
        with pytest.raises(ConfigError, match="history="):
            idx.save_facts("ana", "nope", expected_version=2)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="expected_version"):
            idx.save_facts("ana", b, expected_version=-1)


def test_erasure_by_index_and_by_store(fresh_url: Callable[[], str]) -> None:
    with open_store(fresh_url()) as db, RecallIndex(db) as idx:
        for user in ("ana", "bob"):
            db.session(f"{user}-1", user_id=user).append([said(f"{user}-m", "hi", 1.0)])
            db.session(f"{user}-2", user_id=user).append([said(f"{user}-n", "hi", 1.0)])
            h = FactHistory()
            h.add_messages([said(f"{user}-f", "I live in Lisbon.", 1.0)])
            idx.save_facts(user, h)
        db.delete_session("ana-1")
        assert idx.facts("ana").version == 1  # another session of the user is left
        db.delete_session("ana-2")
        assert idx.facts("ana").version == 0  # the last one went: so did the facts
        db.erase_user("bob")
        assert idx.facts("bob").version == 0
        h = FactHistory()
        h.add_messages([said("c-f", "I live in Rome.", 1.0)])
        idx.save_facts("cy", h)
        idx.erase_user("cy")
        assert len(idx.facts("cy")) == 0


def test_async_twin(fresh_url: Callable[[], str]) -> None:
    async def main() -> None:
        db = await aopen_store(fresh_url())
        try:
            idx = AsyncRecallIndex(db)
            h = await idx.facts("ana")
            h.add_messages([said("m1", "I live in Lisbon.", 1.0)])
            assert await idx.save_facts("ana", h, expected_version=h.version) == 1
            assert h.version == 1
            with pytest.raises(ConcurrentUpdate):
                await idx.save_facts("ana", FactHistory(), expected_version=0)
            got = await idx.facts("ana")
            assert [f.value for f in got.current()] == ["Lisbon"]
            assert await idx.facts_version("ana") == 1
            await idx.erase_user("ana")
            assert (await idx.facts("ana")).version == 0
            assert await idx.facts_version("ana") == 0
            await idx.aclose()
        finally:
            await db.aclose()

    asyncio.run(main())
