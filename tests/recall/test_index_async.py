"""AsyncRecallIndex: the same answers as the sync index, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from convomem.errors import ConfigError, MessageConflict
from convomem.model import Message
from convomem.recall import AsyncRecallIndex, HashingEmbedder, RecallIndex
from convomem.stores import aopen_store, open_store

RECALL_BACKENDS = ["sqlite_memory", "postgresql"]


@pytest.fixture(params=RECALL_BACKENDS)
def fresh_url(request: pytest.FixtureRequest) -> Callable[[], str]:
    url: Callable[[], str] = request.getfixturevalue(request.param).fresh_url
    return url


class AsyncCounting:
    """An async-only embedder that counts the texts it embeds."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=64)
        self.texts: list[str] = []
        # it is the hashing embedder: its declarations too (keys, fusion weights)
        self.fusion_weight = self.inner.fusion_weight
        self.recall_keys = self.inner.recall_keys

    async def aembed_batch(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return self.inner.embed_batch(texts)


TEXTS = [
    "I am allergic to peanuts",
    "my address is 12 Oak street",
    "the invoice total was 45 dollars",
    "we took the train to Paris",
    "my favourite colour is blue",
]


async def test_async_twin_answers_like_the_sync_index(fresh_url: Callable[[], str]) -> None:
    msgs = [Message(f"m{i}", "user", content=t, created_at=float(i)) for i, t in enumerate(TEXTS)]
    emb = AsyncCounting()
    adb = await aopen_store(fresh_url())
    try:
        aidx = AsyncRecallIndex(adb, embedder=emb)
        assert await aidx.add(msgs[:3], user_id="u", session_id="s") == 3
        aidx.submit(msgs, user_id="u", session_id="s")
        aidx.submit(msgs[:1], user_id="v", session_id="s")
        await aidx.aflush()
        assert sorted(emb.texts) == sorted(TEXTS)  # each text once, across users too
        got = await aidx.search("peanut allergy Paris", user_id="u", k=3)
        aidx.submit([Message("m0", "user", content="changed")], user_id="u", session_id="s")
        with pytest.raises(MessageConflict):
            await aidx.aflush()
        assert await aidx.delete(user_id="u", message_ids=["m4"]) == 1
        assert await aidx.erase_user("v") == 1
        assert await aidx.search("peanuts", user_id="v") == []
        await aidx.aclose()
    finally:
        await adb.aclose()
    db = open_store(fresh_url())
    try:
        with RecallIndex(db, embedder=HashingEmbedder(dim=64)) as idx:
            idx.add(msgs, user_id="u", session_id="s")
            want = idx.search("peanut allergy Paris", user_id="u", k=3)
    finally:
        db.close()
    assert [(h.message_id, h.score, h.lexical is None) for h in got] == [
        (h.message_id, h.score, h.lexical is None) for h in want
    ]


async def test_open_from_a_url_and_refuse_the_wrong_twin(fresh_url: Callable[[], str]) -> None:
    url = fresh_url()
    async with await AsyncRecallIndex.open(url) as aidx:
        await aidx.add([Message("m1", "user", content="blue sky")], user_id="u", session_id="s")
        assert [h.message_id for h in await aidx.search("sky", user_id="u")] == ["m1"]
    sync_db = open_store("sqlite://")
    with pytest.raises(ConfigError, match="RecallIndex"):
        AsyncRecallIndex(sync_db)  # type: ignore[arg-type]
    sync_db.close()
    with pytest.raises(ConfigError, match="redis"):
        await AsyncRecallIndex.open("redis://127.0.0.1:1/0")


async def test_async_neighbours_attach_the_adjacent_turns(fresh_url: Callable[[], str]) -> None:
    msgs = [Message(f"m{i}", "user", content=t, created_at=float(i)) for i, t in enumerate(TEXTS)]
    adb = await aopen_store(fresh_url())
    try:
        aidx = AsyncRecallIndex(adb, embedder=HashingEmbedder(dim=64))
        await aidx.add(msgs, user_id="u", session_id="s", seqs=list(range(len(msgs))))
        hit = (await aidx.search(TEXTS[2], user_id="u", k=1, neighbours=1))[0]
        assert (hit.message_id, hit.created_at) == ("m2", 2.0)
        assert [(t.message_id, t.seq) for t in hit.context] == [("m1", 1), ("m3", 3)]
        await aidx.aclose()
    finally:
        await adb.aclose()


class AsyncTwoSided(AsyncCounting):
    """An async model with a query side: ``aembed_query``."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    async def aembed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return list(self.inner.embed(f"{text} zzquery"))


async def test_async_query_is_embedded_with_the_query_side(
    fresh_url: Callable[[], str],
) -> None:
    emb = AsyncTwoSided()
    said = "my favourite colour is teal"
    async with await AsyncRecallIndex.open(fresh_url(), embedder=emb) as idx:
        await idx.add([Message("m1", "user", content=said)], user_id="u", session_id="s")
        (hit,) = await idx.search(said, user_id="u", k=1)
        assert emb.queries == [said] and emb.texts == [said]
        inner = emb.inner
        expect = sum(
            a * b for a, b in zip(inner.embed(said), inner.embed(f"{said} zzquery"), strict=True)
        )
        assert hit.similarity == pytest.approx(expect, abs=1e-6) and expect < 0.99
        assert idx.embedded == 2
