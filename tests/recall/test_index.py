"""RecallIndex on every recall backend (SQLite, PostgreSQL): scope, embedding once,
the background queue, deletion and erasure, filters, bad input."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, InvalidMessage, MessageConflict
from convomem.model import Message
from convomem.recall import HashingEmbedder, RecallIndex
from convomem.stores import open_store
from convomem.summaries.fact_edits import fact_id
from convomem.summaries.keyed import KeyedFact
from convomem.summaries.supersession import FactHistory

EXAMPLES = int(os.environ.get("CONVOMEM_RECALL_EXAMPLES", "12"))
RECALL_BACKENDS = ["sqlite_memory", "postgresql"]


@pytest.fixture(params=RECALL_BACKENDS)
def fresh_url(request: pytest.FixtureRequest) -> Callable[[], str]:
    url: Callable[[], str] = request.getfixturevalue(request.param).fresh_url
    return url


class CountingEmbedder:
    """A HashingEmbedder that counts the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=64)
        self.texts: list[str] = []

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return self.inner.embed_batch(texts)


@pytest.fixture
def index(fresh_url: Callable[[], str]) -> Iterator[RecallIndex]:
    idx = RecallIndex(fresh_url(), embedder=HashingEmbedder(dim=64))
    yield idx
    idx.close()


def msg(text: str, mid: str | None = None, role: str = "user", at: float | None = None) -> Message:
    return Message(mid, role, content=text, created_at=at)


WORDS = ["peanut", "allergy", "oak", "street", "invoice", "blue", "paris", "train"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
SCOPES = [("a", None), ("b", None), ("a", "t1"), ("b", "t1")]


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(
        st.tuples(
            st.sampled_from(SCOPES),
            st.sampled_from(["s1", "s2"]),
            st.sampled_from(["m1", "m2", "m3"]),
            texts,
        ),
        max_size=20,
    ),
    query=texts,
    k=st.integers(1, 8),
)
def test_search_never_crosses_scopes(
    fresh_url: Callable[[], str], data: list[Any], query: str, k: int
) -> None:
    """Colliding session ids, message ids and texts across users and tenants: each
    scope finds exactly its own items, never another's, and up to k of them."""
    owned: dict[tuple[str, str | None], dict[tuple[str, str], str]] = {s: {} for s in SCOPES}
    for scope, sid, mid, text in data:
        owned[scope].setdefault((sid, mid), text)
    with RecallIndex(fresh_url(), embedder=HashingEmbedder(dim=32), candidates=100) as idx:
        for (user, tenant), items in owned.items():
            for (sid, mid), text in items.items():
                idx.add([msg(text, mid)], user_id=user, session_id=sid, tenant=tenant)
        for round_ in range(2):
            for (user, tenant), items in owned.items():
                hits = idx.search(query, user_id=user, tenant=tenant, k=k)
                for h in hits:
                    assert items.get((h.session_id, h.message_id)) == h.text
                words = set(query.split())
                lexical = {t for t in items.values() if set(t.split()) & words}
                assert len(hits) >= min(k, len(lexical))  # of equal texts one hit
            if round_ == 0:
                idx.erase_user("a", tenant=None)
                owned[("a", None)] = {}


def test_each_text_is_embedded_once(fresh_url: Callable[[], str]) -> None:
    db = open_store(fresh_url())
    emb = CountingEmbedder()
    with RecallIndex(db, embedder=emb) as idx:
        batch = [msg("I am allergic to peanuts", "m1"), msg("my street is Oak", "m2")]
        assert idx.add(batch, user_id="u", session_id="s") == 2
        assert idx.add(batch, user_id="u", session_id="s") == 0
        assert idx.add([msg("I am allergic to peanuts", "m3")], user_id="u", session_id="s") == 1
        assert sorted(emb.texts) == ["I am allergic to peanuts", "my street is Oak"]
        idx.search("peanuts", user_id="u")
        idx.search("peanuts", user_id="u")
        assert emb.texts.count("peanuts") == 1
    emb2 = CountingEmbedder()
    with RecallIndex(db, embedder=emb2) as again:  # a new process: nothing re-embedded
        assert again.add(batch, user_id="u", session_id="s") == 0
        assert emb2.texts == []
        assert again.add([msg("", "m9"), msg("  ", "m8")], user_id="u", session_id="s") == 0
    db.close()


def test_submit_runs_in_the_background_and_flush_reports(index: RecallIndex) -> None:
    for i in range(30):
        index.submit([msg(f"note number {i} about trains", f"m{i}")], user_id="u", session_id="s")
    index.flush()
    assert len(index.search("trains", user_id="u", k=50)) == 30
    index.submit([msg("other words", "m1")], user_id="u", session_id="s")
    with pytest.raises(MessageConflict, match="m1"):
        index.flush()
    index.flush()  # reported once
    with pytest.raises(ConfigError, match="user_id"):
        index.submit([msg("x")], user_id="", session_id="s")


def test_conflicts_and_bad_input_write_nothing(index: RecallIndex) -> None:
    index.add([msg("first text", "m1")], user_id="u", session_id="s")
    with pytest.raises(MessageConflict, match="m1"):
        index.add([msg("new", "m2"), msg("other text", "m1")], user_id="u", session_id="s")
    with pytest.raises(MessageConflict, match="m3"):
        index.add([msg("a", "m3"), msg("b", "m3")], user_id="u", session_id="s")
    with pytest.raises(InvalidMessage):
        index.add([msg("fine", "m4"), "not a message"], user_id="u", session_id="s")  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="session_id"):
        index.add([msg("fine", "m5")], user_id="u", session_id="")
    with pytest.raises(ConfigError, match="seqs"):
        index.add([msg("fine", "m5")], user_id="u", session_id="s", seqs=[1, 2])
    with pytest.raises(ConfigError, match="k=0"):
        index.search("x", user_id="u", k=0)
    with pytest.raises(ConfigError, match="kinds"):
        index.search("x", user_id="u", kinds=[])
    with pytest.raises(ConfigError, match="delete"):
        index.delete(user_id="u")
    assert [h.message_id for h in index.search("new fine text", user_id="u")] == ["m1"]


def test_filters_seqs_and_delete(index: RecallIndex) -> None:
    index.add(
        [msg("the invoice total", "m1", at=100.0), msg("the invoice is paid", "m2", at=200.0)],
        user_id="u",
        session_id="s1",
        seqs=[1, 2],
    )
    summary = msg("invoice summary", "x1", at=150.0)
    index.add([summary], user_id="u", session_id="s1", kind="summary")
    index.add([msg("invoice in paris", "m1", "assistant", 300.0)], user_id="u", session_id="s2")
    hits = index.search("invoice", user_id="u")
    assert {(h.session_id, h.message_id) for h in hits} == {
        ("s1", "m1"),
        ("s1", "m2"),
        ("s1", "x1"),
        ("s2", "m1"),
    }
    assert {h.message_id: h.seq for h in hits if h.session_id == "s1"} == {
        "m1": 1,
        "m2": 2,
        "x1": None,
    }
    assert [h.message_id for h in index.search("invoice", user_id="u", kinds="summary")] == ["x1"]
    assert {h.kind for h in index.search("invoice", user_id="u", kinds=["user", "assistant"])} == {
        "user",
        "assistant",
    }
    assert {h.created_at for h in index.search("invoice", user_id="u", as_of=150.0)} == {
        100.0,
        150.0,
    }
    assert index.delete(user_id="u", session_id="s1", message_ids=["m1", "zz"]) == 1
    assert index.delete(user_id="u", message_ids=["m1"]) == 1  # s2's m1
    assert index.delete(user_id="other", session_id="s1") == 0
    assert {h.message_id for h in index.search("invoice", user_id="u")} == {"m2", "x1"}
    assert index.delete(user_id="u", session_id="s1") == 2
    assert index.search("invoice", user_id="u") == []


def test_the_store_erasing_a_user_erases_the_vectors(fresh_url: Callable[[], str]) -> None:
    db = open_store(fresh_url())
    try:
        idx = RecallIndex(db)
        for user in ("u1", "u2"):
            db.session(f"{user}-s", user_id=user).add_items([msg("hello")])
            idx.add([msg("peanut allergy", "m1")], user_id=user, session_id=f"{user}-s")
        assert db.erase_user("u1") == 1
        assert idx.search("peanut", user_id="u1") == []
        assert len(idx.search("peanut", user_id="u2")) == 1
        assert db.delete_session("u2-s", user_id="u2")
        assert idx.search("peanut", user_id="u2") == []
        idx.close()
    finally:
        db.close()


def test_the_query_finds_paraphrases_by_vector_and_words_by_bm25(index: RecallIndex) -> None:
    index.add(
        [
            msg("I am allergic to peanuts", "m1"),
            msg("the invoice total was 45 dollars", "m2"),
            msg("we took the train to Paris", "m3"),
        ],
        user_id="u",
        session_id="s",
    )
    top = index.search("peanutty allergen", user_id="u", k=1)[0]  # no term in common
    assert top.message_id == "m1" and top.lexical is None and top.similarity
    top = index.search("peanut", user_id="u", k=1)[0]  # "peanuts": one stem
    assert top.message_id == "m1" and top.lexical is not None
    top = index.search("Paris", user_id="u", k=1)[0]
    assert top.message_id == "m3" and top.lexical is not None


def test_redis_is_not_a_recall_backend() -> None:
    with pytest.raises(ConfigError, match=r"sqlite.*postgresql"):
        RecallIndex("redis://127.0.0.1:1/0")
    with pytest.raises(ConfigError, match="embedder"):
        RecallIndex("sqlite://", embedder=42)  # type: ignore[arg-type]


class Forwarding:
    """A store database of the caller's own (an instrumenting proxy) over a real one:
    what it says of itself (``kind``) and its ``run_statements`` are all the index uses,
    whatever its class or module."""

    def __init__(self, db: Any, kind: str | None = None) -> None:
        self.inner, self.kind, self.runs = db, kind or db.kind, 0

    def run_statements(self, op: Any, *, write: bool = False) -> Any:
        self.runs += 1
        return self.inner.run_statements(op, write=write)

    def __getattr__(self, name: str) -> Any:  # the rest of StoreDatabase
        return getattr(self.inner, name)


def test_the_index_takes_a_database_by_the_stores_public_seam(
    fresh_url: Callable[[], str],
) -> None:
    db = open_store(fresh_url())
    try:
        proxy = Forwarding(db)
        with RecallIndex(proxy, embedder=HashingEmbedder(dim=32)) as index:
            index.add([Message("m1", "user", content="blue sky")], user_id="u", session_id="s")
            assert [h.message_id for h in index.search("sky", user_id="u")] == ["m1"]
        assert proxy.runs >= 3  # the migrations, the add, the search: all through the hook
        for bad in (Forwarding(db, kind="redis"), object()):
            with pytest.raises(ConfigError, match="store database with search"):
                RecallIndex(bad)  # type: ignore[arg-type]
    finally:
        db.close()


def test_another_embedder_dimension_is_refused(fresh_url: Callable[[], str]) -> None:
    db = open_store(fresh_url())
    try:
        RecallIndex(db, embedder=HashingEmbedder(dim=16)).add(
            [msg("one", "m1")], user_id="u", session_id="s"
        )
        other = RecallIndex(db, embedder=HashingEmbedder(dim=32))
        with pytest.raises(ConfigError, match="16"):
            other.add([msg("two", "m2")], user_id="u", session_id="s")
        with pytest.raises(ConfigError, match=r"built with 'hashing\(dim=16"):
            other.search("one two", user_id="u")
    finally:
        db.close()


def test_another_model_of_the_same_dimension_is_refused(fresh_url: Callable[[], str]) -> None:
    # MiniLM and E5 both give 384 numbers: the index keeps the name of its model
    db = open_store(fresh_url())
    try:
        RecallIndex(db, embedder=HashingEmbedder(dim=16, seed=1)).add(
            [msg("one", "m1")], user_id="u", session_id="s"
        )
        other = RecallIndex(db, embedder=HashingEmbedder(dim=16, seed=2))
        with pytest.raises(ConfigError, match=r"is 'hashing\(dim=16.*seed=2\)', but .* built"):
            other.add([msg("two", "m2")], user_id="u", session_id="s")
        with pytest.raises(ConfigError, match="use the embedder it was built with"):
            other.search("one", user_id="u")
        same = RecallIndex(db, embedder=HashingEmbedder(dim=16, seed=1))
        same.add([msg("two", "m2")], user_id="u", session_id="s")
        assert {h.message_id for h in same.search("one two", user_id="u")} == {"m1", "m2"}
        nameless = RecallIndex(db, embedder=CountingEmbedder2())  # no name: not checked
        assert nameless.search("one", user_id="u")[0].message_id == "m1"
    finally:
        db.close()


class CountingEmbedder2:
    """A 16-number embedder that gives no model name."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dim=16, seed=1)

    def embed(self, text: str) -> list[float]:
        return list(self.inner.embed(text))


def test_neighbours_attach_the_adjacent_turns_of_the_session(index: RecallIndex) -> None:
    turns = ["what is your name", "I am Ada", "where do you live", "in Paris near the oak"]
    index.add(
        [msg(t, f"m{i}", at=float(i)) for i, t in enumerate(turns)],
        user_id="u",
        session_id="s1",
        seqs=[10, 11, 12, 13],
    )
    index.add([msg("oak trees", "t0", at=9.0)], user_id="u", session_id="s2", seqs=[12])
    index.add([msg("oak leaves", "x", at=9.0)], user_id="other", session_id="s1", seqs=[12])
    index.add([msg("oak summary")], user_id="u", session_id="s1", kind="summary")
    hits = {h.message_id: h for h in index.search("oak", user_id="u", k=5, neighbours=1)}
    assert hits["m3"].created_at == 3.0
    assert [(t.message_id, t.seq, t.text) for t in hits["m3"].context] == [
        ("m2", 12, "where do you live")
    ]
    assert hits["t0"].context == ()  # alone in its session
    summary = next(h for h in hits.values() if h.kind == "summary")
    assert summary.context == ()  # no seq: no neighbours
    wide = index.search("Paris", user_id="u", k=1, neighbours=2)[0]
    assert [t.message_id for t in wide.context] == ["m1", "m2"]
    assert index.search("Paris", user_id="u", k=1)[0].context == ()
    with pytest.raises(ConfigError, match="neighbours"):
        index.search("Paris", user_id="u", neighbours=-1)


class TwoSided(CountingEmbedder):
    """A model with a query side (like E5): ``embed_query`` marks the query's text, so
    the query and a message with the same words get different vectors."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return list(self.inner.embed(f"{text} zzquery"))


def test_a_query_is_embedded_with_the_query_side(fresh_url: Callable[[], str]) -> None:
    emb = TwoSided()
    said = "my favourite colour is teal"
    with RecallIndex(fresh_url(), embedder=emb) as idx:
        idx.add([Message("m1", "user", content=said)], user_id="u", session_id="s")
        (hit,) = idx.search(said, user_id="u", k=1)
        idx.search(said, user_id="u", k=1)  # a repeated query is not embedded again
        assert emb.queries == [said]
        assert said in emb.texts and f"{said} zzquery" not in emb.texts
        # the hit's cosine is the query side's against the message's: below 1
        inner = emb.inner
        expect = sum(
            a * b for a, b in zip(inner.embed(said), inner.embed(f"{said} zzquery"), strict=True)
        )
        assert hit.similarity == pytest.approx(expect, abs=1e-6) and expect < 0.99
        assert idx.embedded == 2  # the message once, the query once


def test_without_a_query_side_a_query_shares_the_texts_cache(
    fresh_url: Callable[[], str],
) -> None:
    emb = CountingEmbedder()
    with RecallIndex(fresh_url(), embedder=emb) as idx:
        idx.add([Message("m1", "user", content="teal")], user_id="u", session_id="s")
        (hit,) = idx.search("teal", user_id="u", k=1)
        assert emb.texts.count("teal") == 1 and idx.embedded == 1
        assert hit.similarity == pytest.approx(1.0)


def test_expired_sessions_are_not_found_and_their_facts_not_served(
    fresh_url: Callable[[], str],
) -> None:
    """Expiry is a rule of reading (``stores.expiry``): the moment a session expires (the
    store's TTL, or its own ``convomem:ttl_seconds`` after its last write) its items are
    not found, even where they would rank first, and the facts said in it are not
    served; a value it had superseded is current again. Nothing was swept."""
    now = [1000.0]
    db = open_store(fresh_url(), ttl=100, clock=lambda: now[0])
    try:
        idx = RecallIndex(db, embedder=HashingEmbedder(dim=64), clock=lambda: now[0])
        db.session("a", user_id="u").add_items([msg("hello")])  # expires at 1100
        now[0] = 1090.0
        db.session("b", user_id="u").add_items([msg("hello")])  # expires at 1190
        db.session("c", user_id="u").set_metadata({"convomem:ttl_seconds": 20})  # 1110
        strong = [msg(f"peanut peanut allergy {i}", f"a{i}") for i in range(6)]
        idx.add(strong, user_id="u", session_id="a")
        idx.add([msg("peanut note", "b1")], user_id="u", session_id="b")
        idx.add([msg("peanut peanut peanut", "c1")], user_id="u", session_id="c")
        facts = FactHistory()
        facts.add([KeyedFact("diet", "vegan", session_id="b", valid_from=1.0)])
        facts.add([KeyedFact("diet", "vegetarian", session_id="a", valid_from=2.0)])
        facts.add([KeyedFact("city", "Porto", session_id="c", valid_from=3.0)])
        idx.save_facts("u", facts)

        def found(k: int) -> list[str]:
            return [h.message_id for h in idx.search("peanut allergy", user_id="u", k=k)]

        def current() -> dict[str, str]:
            return {f.attribute: f.value for f in idx.facts("u").current()}

        assert len(found(10)) == 8 and found(1)[0].startswith("a")
        assert current() == {"diet": "vegetarian", "city": "Porto"}
        ids = {f.value: fact_id(f) for f in idx.facts("u").versions()}
        now[0] = 1100.0  # "a" expired (the store's TTL)
        assert found(1) == ["c1"] and sorted(found(10)) == ["b1", "c1"]
        assert current() == {"diet": "vegan", "city": "Porto"}
        kept = {f.value: fact_id(f) for f in idx.facts("u").versions()}
        assert kept == {v: i for v, i in ids.items() if v != "vegetarian"}  # ids stay
        now[0] = 1110.0  # "c" expired (its own TTL)
        assert found(1) == ["b1"] and found(10) == ["b1"]
        assert current() == {"diet": "vegan"}
        assert [f.value for f in idx.facts("u").history(None, subject="user")] == ["vegan"]
        assert db.sweep() == 1  # only the store's TTL is swept; reading never waited for it
        assert found(10) == ["b1"]
        idx.close()
    finally:
        db.close()


def test_deleting_a_session_deletes_the_facts_said_in_it(fresh_url: Callable[[], str]) -> None:
    idx = RecallIndex(fresh_url(), embedder=HashingEmbedder(dim=64))
    facts = FactHistory()
    facts.add([KeyedFact("city", "Lisbon", session_id="s1", valid_from=1.0)])
    facts.add([KeyedFact("city", "Porto", session_id="s2", valid_from=2.0)])
    facts.add([KeyedFact("diet", "vegan", session_id="s2", valid_from=3.0)])
    idx.save_facts("u", facts)
    idx.add([msg("peanut", "m1")], user_id="u", session_id="s2")
    assert idx.delete(user_id="u", session_id="s2") == 1
    h = idx.facts("u")
    assert [(f.attribute, f.value) for f in h.current()] == [("city", "Lisbon")]
    assert [f.value for f in h.history(None, subject="user")] == ["Lisbon"]
    assert idx.delete(user_id="u", session_id="s2") == 0  # nothing left to do
    assert idx.facts("u").version == h.version
    idx.delete(user_id="u", message_ids=["m9"])  # some messages: facts stay
    assert [f.value for f in idx.facts("u").current()] == ["Lisbon"]
    idx.close()
