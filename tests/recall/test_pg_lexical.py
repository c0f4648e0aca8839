"""The PostgreSQL recall backend's lexical ranking: BM25 over each query word's newest
matches of the user, document frequencies counted within them, against a Python oracle."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.recall import HashingEmbedder, RecallIndex, _pg_recall
from convomem.recall._backend import Item, Scope
from convomem.recall.fusion import K1, B
from convomem.stores import open_store

from .test_pg_recall import run, sql, statement

EXAMPLES = int(os.environ.get("CONVOMEM_PG_KEYS_EXAMPLES", "20"))
WORDS = ["oak", "river", "lemon", "violin", "garden", "winter", "copper"]
OWNERS = [Scope("", "u"), Scope("", "v"), Scope("t", "u")]
WINDOW = 6
EPS = 1e-9


def oracle(texts: dict[int, str], terms: list[str], n: int, window: int) -> list[tuple[int, float]]:
    """The ``n`` best ``(rid, score)``: the union of each term's newest matches (its
    share of ``window``), each scored by BM25 with binary term frequency, document
    length in distinct words, and document frequencies and the average length counted
    within the union."""
    wanted = set(terms)
    words = {r: set(t.split()) for r, t in texts.items()}
    union: set[int] = set()
    share = max(1, window // len(wanted))
    for term in wanted:
        union.update(sorted((r for r in texts if term in words[r]), reverse=True)[:share])
    if not union:
        return []
    avgdl = max(sum(len(words[r]) for r in union) / len(union), 1.0)
    df = {t: sum(t in words[r] for r in union) for t in wanted}
    scores = {}
    for r in union:
        norm = K1 + 1.0
        norm /= 1 + K1 * (1 - B + B * len(words[r]) / avgdl)
        scores[r] = sum(
            math.log(1 + (len(union) - df[t] + 0.5) / (df[t] + 0.5)) * norm
            for t in wanted & words[r]
        )
    return sorted(scores.items(), key=lambda p: (-p[1], -p[0]))[:n]


text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


def test_lexical_ranks_the_newest_matches_by_bm25(
    postgresql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_pg_recall, "LEXICAL_WINDOW", WINDOW)  # windows cut in examples
    db = open_store(postgresql.fresh_url())
    idx = RecallIndex(db, embedder=HashingEmbedder(dim=8))
    b = idx.backend

    @settings(max_examples=EXAMPLES, deadline=None)
    @given(
        st.lists(
            st.tuples(st.sampled_from(OWNERS), st.sampled_from(["user", "tool"]), text),
            max_size=30,
        ),
        st.sampled_from(OWNERS),
        st.lists(st.sampled_from([*WORDS, "absent"]), min_size=1, max_size=4),
        st.integers(1, 8),
        st.none() | st.just(["user"]),
    )
    def check(
        stored: list[Any], scope: Scope, terms: list[str], n: int, kinds: list[str] | None
    ) -> None:
        statement(idx, f"TRUNCATE {b.items} CASCADE")
        for i, (owner, kind, words) in enumerate(stored):  # one at a time: rids in order
            it = Item("s", f"m{i}", None, kind, 0.0, words, b"\0" * 32)
            run(idx, lambda o=owner, it=it: b.insert(o, [it], 8), write=True)
        rid_of = {m: r for r, m in sql(idx, f"SELECT rid, message_id FROM {b.items}")}
        mine = {
            rid_of[f"m{i}"]: words
            for i, (owner, kind, words) in enumerate(stored)
            if owner == scope and (kinds is None or kind in kinds)
        }
        got = run(idx, lambda: b.lexical(scope, terms, n, kinds, None))
        want = oracle(mine, terms, n, WINDOW)
        assert len(got) == len(want)
        for (rid, score), (_, best) in zip(got, want, strict=True):
            assert rid in mine  # in scope, through the filter
            assert abs(score - best) < EPS, (got, want)
        ties_ok = all(
            r == w or abs(s - ws) < EPS for (r, s), (w, ws) in zip(got, want, strict=True)
        )
        assert ties_ok, (got, want)

    try:
        check()
    finally:
        idx.close()
        db.close()


def test_an_old_rare_word_is_found_past_a_common_words_window(
    postgresql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every word has its own window: a common word's newest matches cannot crowd out
    the one old message holding the rare word the question is about."""
    monkeypatch.setattr(_pg_recall, "LEXICAL_WINDOW", 5)
    db = open_store(postgresql.fresh_url())
    idx = RecallIndex(db, embedder=HashingEmbedder(dim=8))
    b = idx.backend
    scope = Scope("", "u")
    try:
        texts = ["i eat pescatarian food"] + [f"i went out {w}" for w in WORDS * 3]
        for i, t in enumerate(texts):  # the rare word's message is the oldest
            it = Item("s", f"m{i}", None, "user", 0.0, t, b"\0" * 32)
            run(idx, lambda it=it: b.insert(scope, [it], 8), write=True)
        got = run(idx, lambda: b.lexical(scope, ["what", "i", "pescatarian"], 3, None, None))
        (first_rid, _), *_ = got
        (mid,) = sql(idx, f"SELECT message_id FROM {b.items} WHERE rid = %s", [first_rid])[0]
        assert mid == "m0"
    finally:
        idx.close()
        db.close()
