"""The PostgreSQL recall backend's lexical ranking: BM25 over the user's newest matches,
each word's document frequency counted within them, against a Python oracle."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.recall import HashingEmbedder, RecallIndex, _pg_recall
from convomem.recall._backend import Item, Scope
from convomem.recall._partition import K1, B
from convomem.stores import open_store

from .test_pg_recall import run, sql, statement

EXAMPLES = int(os.environ.get("CONVOMEM_PG_KEYS_EXAMPLES", "20"))
WORDS = ["oak", "river", "lemon", "violin", "garden", "winter", "copper"]
OWNERS = [Scope("", "u"), Scope("", "v"), Scope("t", "u")]
WINDOW = 6
EPS = 1e-9


def oracle(texts: dict[int, str], terms: list[str], n: int, window: int) -> list[tuple[int, float]]:
    """The ``n`` best ``(rid, score)``: the newest ``window`` texts holding a term, each
    scored by BM25 with binary term frequency, document length in distinct words, and
    document frequencies and the average length counted within the window."""
    wanted = set(terms)
    matches = sorted((r for r, t in texts.items() if wanted & set(t.split())), reverse=True)
    win = matches[:window]
    if not win:
        return []
    words = {r: set(texts[r].split()) for r in win}
    avgdl = max(sum(len(w) for w in words.values()) / len(win), 1.0)
    df = {t: sum(t in w for w in words.values()) for t in wanted}
    scores = {}
    for r in win:
        norm = K1 + 1.0
        norm /= 1 + K1 * (1 - B + B * len(words[r]) / avgdl)
        scores[r] = sum(
            math.log(1 + (len(win) - df[t] + 0.5) / (df[t] + 0.5)) * norm for t in wanted & words[r]
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
        st.lists(st.tuples(st.sampled_from(OWNERS), st.sampled_from(["user", "tool"]), text)),
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
