"""The PostgreSQL recall backend's own paths: pgvector's HNSW with iterative scans still
returns k items of one user among many others', and the exact fallback for pgvector
older than 0.8 gives the same items; an item indexed under several keys ranks by its
best key (against a brute-force oracle, and against the SQLite backend), and its keys go
when it goes."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError
from convomem.model import Message
from convomem.recall import HashingEmbedder, RecallIndex
from convomem.recall._backend import Item, Scope
from convomem.recall._core import unit32
from convomem.recall.keys import KINDS
from convomem.stores import open_store
from convomem.stores.statements import Q


def test_filtered_vector_search_returns_k_for_one_user(postgresql: Any) -> None:
    db = open_store(postgresql.fresh_url())
    try:
        idx = RecallIndex(db, embedder=HashingEmbedder(dim=256), candidates=10)
        others = [
            Message(f"o{i}", "user", content=f"weather numbers report {i}") for i in range(600)
        ]
        idx.add(others, user_id="crowd", session_id="s")
        mine = [Message(f"m{i}", "user", content=f"my cat numbr {i}") for i in range(15)]
        idx.add(mine, user_id="me", session_id="s")
        query = "numbers"  # a word of the crowd's items only; mine are near it by vector
        hits = idx.search(query, user_id="me", k=10)
        assert idx.backend.iterative is True  # pgvector 0.8+ in the test server
        assert all(h.message_id.startswith("m") and h.lexical is None for h in hits)
        vector = [h for h in hits if h.similarity is not None]
        idx.backend.iterative = False  # the exact path older pgvector takes
        exact = idx.search(query, user_id="me", k=10)
        assert [h.message_id for h in exact] == [h.message_id for h in hits]
        assert len(vector) == len([h for h in exact if h.similarity is not None])
        assert len(hits) == 10
        idx.close()
    finally:
        db.close()


# -- several keys per item (Item.vec: one or more unit vectors) -----------------------

DIM = 6
EXAMPLES = int(os.environ.get("CONVOMEM_PG_KEYS_EXAMPLES", "20"))
EPS = 1e-4  # pgvector computes cosines in float32
OWNERS = [Scope("", "u"), Scope("", "v"), Scope("t", "u")]


def unit(v: Sequence[float]) -> Any:
    a = np.asarray(v, dtype=np.float64)
    norm = np.linalg.norm(a)
    return (a / norm if norm else a).astype(np.float32)


def item(mid: str, keys: Sequence[Sequence[float]], kind: str = "user", at: float = 0.0) -> Item:
    return Item(
        "s", mid, None, kind, at, f"text of {mid}", b"".join(unit(k).tobytes() for k in keys)
    )


def run(idx: RecallIndex, op: Callable[[], Any], write: bool = False) -> Any:
    """A backend operation through the store's statement hook (a transaction when ``write``)."""
    return idx.db.run_statements(op, write=write)


def sql(idx: RecallIndex, text: str, params: Sequence[Any] = ()) -> list[Any]:
    def op() -> Any:
        rows = yield Q.all(text, params)
        return rows

    return list(run(idx, op))


def statement(idx: RecallIndex, text: str) -> None:
    def op() -> Any:
        yield Q.run(text)

    run(idx, op, write=True)


def forcing_index(op: Any) -> Any:
    """``op`` with sequential scans and sorts priced out inside its transaction, so the
    HNSW indexes answer even over a few rows."""
    reply = None
    while True:
        try:
            q = op.send(reply)
        except StopIteration as stop:
            return stop.value
        reply = yield q
        if q.sql.startswith("BEGIN"):
            yield Q.run("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")


def both_paths(
    idx: RecallIndex, scope: Scope, query: Any, n: int, kinds: Any = None, as_of: Any = None
) -> list[list[tuple[int, float]]]:
    """``vector()`` by the HNSW indexes and by the exact fallback."""
    b = idx.backend
    b.iterative = True
    hnsw = run(idx, lambda: forcing_index(b.vector(scope, query, n, kinds, as_of)))
    b.iterative = False
    exact = run(idx, lambda: b.vector(scope, query, n, kinds, as_of))
    b.iterative = True
    return [hnsw, exact]


def check_against(got: list[tuple[int, float]], oracle: dict[int, float], n: int) -> None:
    """``got`` is the ``n`` best of ``oracle`` (rid: max cosine over its keys) above the
    tolerance, best first; ties within float32 error may come in either order."""
    best = sorted(oracle.values(), reverse=True)
    lo = min(n, sum(1 for s in best if s > EPS))
    hi = min(n, sum(1 for s in best if s > -EPS))
    assert lo <= len(got) <= hi, (got, oracle)
    assert len({rid for rid, _ in got}) == len(got)
    for i, (rid, c) in enumerate(got):
        assert rid in oracle, (rid, oracle)  # in scope and through the filters
        assert abs(c - oracle[rid]) < EPS
        assert abs(c - best[i]) < EPS, (got, oracle)


def open_index(postgresql: Any) -> tuple[Any, RecallIndex]:
    db = open_store(postgresql.fresh_url())
    return db, RecallIndex(db, embedder=HashingEmbedder(dim=DIM))


vectors = st.lists(st.integers(-3, 3), min_size=DIM, max_size=DIM).filter(any)
stored = st.tuples(
    st.sampled_from(OWNERS),
    st.sampled_from(["user", "assistant", "tool"]),
    st.integers(0, 4),
    st.lists(vectors, min_size=1, max_size=4),
)


def test_vector_search_ranks_an_item_by_its_best_key(postgresql: Any) -> None:
    db, idx = open_index(postgresql)
    b = idx.backend

    @settings(max_examples=EXAMPLES)
    @given(
        st.lists(stored, max_size=20),
        st.sampled_from(OWNERS),
        vectors,
        st.integers(1, 6),
        st.none() | st.lists(st.sampled_from(["user", "assistant", "tool"]), min_size=1),
        st.none() | st.integers(0, 4),
    )
    def check(items: list[Any], scope: Scope, q: list[int], n: int, kinds: Any, as_of: Any) -> None:
        statement(idx, f"TRUNCATE {b.items} CASCADE")
        for owner in OWNERS:
            mine = [
                item(f"m{i}", keys, kind, at)
                for i, (o, kind, at, keys) in enumerate(items)
                if o == owner
            ]
            if mine:
                assert run(idx, lambda o=owner, m=mine: b.insert(o, m, DIM), write=True) == len(
                    mine
                )
        rids = {m: r for r, m in sql(idx, f"SELECT rid, message_id FROM {b.items} ")}
        query = unit(q)
        oracle = {
            rids[f"m{i}"]: max(float(unit(k).astype(np.float64) @ query) for k in keys)
            for i, (o, kind, at, keys) in enumerate(items)
            if o == scope and (kinds is None or kind in kinds) and (as_of is None or at <= as_of)
        }
        for got in both_paths(idx, scope, query, n, kinds, as_of):
            check_against(got, oracle, n)

    try:
        check()
    finally:
        idx.close()
        db.close()


def test_many_keys_of_few_items_at_the_top_do_not_crowd_out_the_next_items(
    postgresql: Any,
) -> None:
    db, idx = open_index(postgresql)
    b = idx.backend
    far = [0, 0, 0, 0, 0, 1]
    a_keys = [far] + [[1, 0.01 * i, 0, 0, 0, 0] for i in range(9)]  # 9 keys near the query
    b_keys = [far] + [[1, 0.2 + 0.01 * i, 0, 0, 0, 0] for i in range(9)]
    items = [
        item("a", a_keys),
        item("b", b_keys),
        item("c", [far, [1, 1, 0, 0, 0, 0]]),
        item("d", [[1, 0, 2, 0, 0, 0]]),  # its one key: below b's and c's best
        *(item(f"x{i}", [far]) for i in range(10)),
    ]
    try:
        run(idx, lambda: b.insert(OWNERS[0], items, DIM), write=True)
        rids = {m: r for r, m in sql(idx, f"SELECT rid, message_id FROM {b.items}")}
        for n, want in ((2, ["a", "b"]), (3, ["a", "b", "c"])):
            for got in both_paths(idx, OWNERS[0], unit([1, 0, 0, 0, 0, 0]), n):
                assert [r for r, _ in got] == [rids[m] for m in want]
    finally:
        idx.close()
        db.close()


def test_single_key_items_of_a_store_from_before_keys_mix_with_multi_key_ones(
    postgresql: Any,
) -> None:
    db, idx = open_index(postgresql)
    b = idx.backend
    old = [item(f"old{i}", [[1, i, 0, 0, 0, 0]]) for i in range(6)]
    run(idx, lambda: b.insert(OWNERS[0], old, DIM), write=True)
    statement(idx, f"DROP TABLE {b.keys}")  # the store as the version before keys left it
    idx.close()
    idx = RecallIndex(db, embedder=HashingEmbedder(dim=DIM))  # a new process migrates
    b = idx.backend
    try:
        indexes = sql(idx, "SELECT indexname FROM pg_indexes WHERE tablename = %s", [b.keys[-20:]])
        assert "convomem_recall_keys_hnsw" in {r[0] for r in indexes}
        new = [item(f"new{i}", [[0, 0, 1, 0, 0, 0], [1, i + 0.5, 0, 0, 0, 0]]) for i in range(6)]
        assert run(idx, lambda: b.insert(OWNERS[0], new, DIM), write=True) == 6
        query = unit([1, 2, 0, 0, 0, 0])
        rids = {m: r for r, m in sql(idx, f"SELECT rid, message_id FROM {b.items}")}
        oracle = {rids[f"old{i}"]: float(unit([1, i, 0, 0, 0, 0]) @ query) for i in range(6)}
        oracle |= {rids[f"new{i}"]: float(unit([1, i + 0.5, 0, 0, 0, 0]) @ query) for i in range(6)}
        for got in both_paths(idx, OWNERS[0], query, 5):
            check_against(got, oracle, 5)
            assert {m for m, r in rids.items() if r in dict(got)} >= {"old2", "new1", "new2"}
    finally:
        idx.close()
        db.close()


def key_rows(idx: RecallIndex) -> dict[tuple[str, str], int]:
    rows = sql(idx, f"SELECT tenant, user_id, count(*) FROM {idx.backend.keys} GROUP BY 1, 2")
    return {(t, u): int(c) for t, u, c in rows}


def test_keys_go_with_their_items_and_only_new_items_get_keys(postgresql: Any) -> None:
    db, idx = open_index(postgresql)
    b = idx.backend
    three = [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0]]
    try:
        for scope in OWNERS:
            for sid in ("s1", "s2"):
                vec = item("", three).vec
                items = [Item(sid, f"m{i}", i, "user", 0.0, "t", vec) for i in range(3)]
                assert run(idx, lambda s=scope, i=items: b.insert(s, i, DIM), write=True) == 3
        assert key_rows(idx) == {("", "u"): 12, ("", "v"): 12, ("t", "u"): 12}
        for tenant in (None, "t"):  # sessions of the store, for its deletes to reach
            db.session("s2", user_id="u", tenant=tenant).add_items(
                [Message("x", "user", content="hi")]
            )
        two = item("", three[:2]).vec
        again = [
            Item("s1", "m0", 0, "user", 0.0, "t", item("", three).vec),  # already there
            item("m9", three[:2]),
            Item("s1", "m9", 9, "user", 0.0, "t", two),  # the same id in another session
            item("m8", [three[0], [0] * DIM]),
        ]
        assert run(idx, lambda: b.insert(OWNERS[1], again, DIM), write=True) == 3
        assert key_rows(idx)[("", "v")] == 14  # each m9's second key; a zero key: none
        ragged = [item("m7", three), Item("s", "m6", None, "user", 0.0, "t", b"\0" * 4 * 7)]
        with pytest.raises(ConfigError, match="m6"):
            run(idx, lambda: b.insert(OWNERS[1], ragged, DIM), write=True)
        assert key_rows(idx)[("", "v")] == 14
        assert not sql(idx, f"SELECT 1 FROM {b.items} WHERE message_id = 'm7'")
        idx.delete(user_id="u", session_id="s1", message_ids=["m0"])
        assert key_rows(idx) == {("", "u"): 10, ("", "v"): 14, ("t", "u"): 12}
        db.delete_session("s2", user_id="u")  # its trigger: the tenant's items of s2
        assert key_rows(idx) == {("", "u"): 4, ("", "v"): 8, ("t", "u"): 12}
        idx.erase_user("v")
        db.erase_user("u", tenant="t")
        assert key_rows(idx) == {("", "u"): 4, ("t", "u"): 6}
        idx.erase_user("u")
        assert key_rows(idx) == {("t", "u"): 6}
    finally:
        idx.close()
        db.close()


def test_an_index_with_every_key_kind_finds_what_the_sqlite_one_finds(postgresql: Any) -> None:
    words = ["cat", "dog", "boat", "train", "river", "piano", "violin", "garden"]
    words += ["winter", "summer", "coffee", "lemon"]
    messages = [
        Message(
            f"m{i}",
            "user" if i % 2 == 0 else "assistant",
            content=f"{words[i % 12]} and {words[(i * 5) % 12]} today. "
            f"I keep a {words[(i * 7 + 3) % 12]} at home; the {words[(i + 4) % 12]} is old.",
        )
        for i in range(40)
    ]
    db = open_store(postgresql.fresh_url())
    emb = HashingEmbedder(dim=64)
    indexes = [
        RecallIndex(db, embedder=emb, keys=KINDS),
        RecallIndex("sqlite://", embedder=emb, keys=KINDS),
    ]
    try:
        for idx in indexes:
            assert idx.add(messages, user_id="u", session_id="s") == 40
            idx.add(messages[:3], user_id="v", session_id="s")
        assert sum(key_rows(indexes[0]).values()) > 40 * 2  # sentences and exchanges
        for query in ("a violin at home", "the old garden", "lemon coffee", "river and winter"):
            q = unit32(np, emb.embed_batch([query])[0])
            found = []
            for idx in indexes:
                b = idx.backend
                got = run(idx, lambda b=b, q=q: b.vector(Scope("", "u"), q, 8, None, None))
                rows = run(idx, lambda b=b, got=got: b.rows(Scope("", "u"), [r for r, _ in got]))
                found.append([(rows[r].message_id, c) for r, c in got])
            pg, lite = found
            assert len(pg) == len(lite) == 8
            lite_sims = dict(lite)
            for (pm, pc), (lm, lc) in zip(pg, lite, strict=True):
                assert abs(pc - lc) < EPS
                assert pm not in lite_sims or abs(pc - lite_sims[pm]) < EPS
                assert pm == lm or sum(abs(c - pc) < EPS for _, c in pg) > 1  # or a tie
    finally:
        for idx in indexes:
            idx.close()
        db.close()


def test_a_store_from_before_terms_is_reindexed_by_them(postgresql: Any) -> None:
    """An items table whose ``tsv`` was made from the text: opening the index computes
    each row's terms and remakes ``tsv`` from them, so stems match as on SQLite."""
    url = postgresql.fresh_url()
    db = open_store(url)
    try:
        idx = RecallIndex(db, embedder=HashingEmbedder(dim=16))
        idx.add(
            [Message("m1", "user", content="We painted the fences")], user_id="u", session_id="s"
        )
        items = idx.backend.items
        statement(idx, f"ALTER TABLE {items} DROP COLUMN tsv")
        statement(
            idx,
            f"ALTER TABLE {items} ADD COLUMN tsv TSVECTOR "
            "GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED",
        )
        statement(idx, f"UPDATE {items} SET terms = ''")
        assert [h.lexical for h in idx.search("paint fence", user_id="u")] in ([], [None])
        again = RecallIndex(db, embedder=HashingEmbedder(dim=16))
        (hit,) = again.search("paint fence", user_id="u")
        assert hit.message_id == "m1" and hit.lexical is not None
        assert sql(again, f"SELECT terms FROM {items}") == [("paint fenc",)]
    finally:
        db.close()


def test_a_store_with_terms_is_not_reindexed_when_an_index_opens(postgresql: Any) -> None:
    """Opening an index over an up-to-date store leaves ``terms`` and ``tsv`` as they
    are (the upgrade reads the column's definition in the store's schema, whose name the
    database gives quoted): no rewrite of every row at each start."""
    db = open_store(postgresql.fresh_url())
    try:
        idx = RecallIndex(db, embedder=HashingEmbedder(dim=16))
        idx.add([Message("m1", "user", content="We painted")], user_id="u", session_id="s")
        items = idx.backend.items
        where = f"attrelid = '{items}'::regclass AND attname = 'tsv' AND NOT attisdropped"
        before = sql(idx, f"SELECT attnum FROM pg_attribute WHERE {where}")
        statement(idx, f"UPDATE {items} SET terms = 'kept as stored'")
        RecallIndex(db, embedder=HashingEmbedder(dim=16)).close()
        assert sql(idx, f"SELECT terms FROM {items}") == [("kept as stored",)]
        assert sql(idx, f"SELECT attnum FROM pg_attribute WHERE {where}") == before
    finally:
        db.close()
