"""The hybrid ranking against a brute-force oracle: exact BM25F (over the user's own
items and their session neighbours, ``_recall_oracle``) and exact cosine computed in
Python over the same corpus, fused linearly or by reciprocal rank fusion, of repeated
texts the best only, give the same ranking as the SQLite index."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _recall_oracle import bm25f, close_ranking, linear
from convomem.errors import ConfigError
from convomem.model import Message
from convomem.recall import HashingEmbedder, RecallIndex
from convomem.recall.analyze import query_terms as analyzed
from convomem.recall.fusion import (
    LINEAR_WEIGHT,
    VECTOR_WEIGHT,
    fuse,
    fuse_linear,
    linear_weight_of,
    query_terms,
    tie_ranks,
    vector_weight_of,
)

EXAMPLES = int(os.environ.get("CONVOMEM_RECALL_EXAMPLES", "40"))
WORDS = ["peanut", "allergy", "oak", "street", "invoice", "blue", "paris", "train", "cafe", "the"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)


def unit32(v: Any) -> Any:
    a = np.asarray(v, dtype=np.float64)
    norm = np.sqrt(a @ a)
    return (a / norm if norm else a).astype(np.float32)


def brute_rrf(
    lexical: dict[int, float], vector: dict[int, float], rrf_k: int, weight: float = 1.0
) -> dict[int, float]:
    def ranks(scores: dict[int, float], rel: bool, tol: float) -> dict[int, int]:
        out = {}
        for key, s in scores.items():
            slack = tol * max(abs(s), 1e-300) if rel else tol
            out[key] = 1 + sum(1 for o in scores.values() if o - s > slack)
        return out

    lr, vr = ranks(lexical, True, 1e-9), ranks(vector, False, 1e-6)
    return {
        key: (1 / (rrf_k + lr[key]) if key in lr else 0.0)
        + (weight / (rrf_k + vr[key]) if key in vr else 0.0)
        for key in {*lexical, *vector}
    }


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    mine=st.lists(texts, min_size=1, max_size=10),
    theirs=st.lists(texts, max_size=6),
    query=texts,
    k=st.integers(1, 12),
    rrf_k=st.integers(0, 80),
    weight=st.sampled_from([None, 0.0, 0.25, 1.0, 3.0]),
    fusion=st.sampled_from(["linear", "rrf"]),
    sessions=st.integers(1, 3),
)
def test_hybrid_ranking_matches_the_brute_force_oracle(
    mine: list[str],
    theirs: list[str],
    query: str,
    k: int,
    rrf_k: int,
    weight: float | None,
    fusion: str,
    sessions: int,
) -> None:
    """``weight=None``: ``LINEAR_WEIGHT`` (linear), the embedder's ``fusion_weight``
    (RRF). The user's items are spread over ``sessions`` sessions (their neighbours)."""
    emb = HashingEmbedder(dim=48)
    opts = {"candidates": 64, "rrf_k": rrf_k, "vector_weight": weight, "fusion": fusion}
    where = [(f"s{i % sessions}", i) for i in range(len(mine))]
    with RecallIndex("sqlite://", embedder=emb, **opts) as idx:
        idx.add(
            [Message(f"o{i}", "user", content=t) for i, t in enumerate(theirs)],
            user_id="other",
            session_id="s0",
        )
        for i, t in enumerate(mine):
            idx.add([Message(f"m{i}", "user", content=t)], user_id="me", session_id=where[i][0])
        hits = idx.search(query, user_id="me", k=k)
    scores = bm25f(mine, where, analyzed(query))
    lexical = {i: s for i, s in enumerate(scores) if s > 0}
    q = unit32(emb.embed(query))
    cos = {
        i: float(unit32(emb.embed(t)).astype(np.float64) @ q.astype(np.float64))
        for i, t in enumerate(mine)
    }
    vector = {i: c for i, c in cos.items() if c > 1e-6}
    if fusion == "linear":
        fused = linear(lexical, vector, LINEAR_WEIGHT if weight is None else weight)
    else:
        fused = brute_rrf(lexical, vector, rrf_k, emb.fusion_weight if weight is None else weight)
    order = sorted(fused, key=lambda i: (-fused[i], -i))
    best: dict[str, float] = {}
    for i in order:  # of repeated texts, the best only
        best.setdefault(mine[i], fused[i])
    assert len({h.text for h in hits}) == len(hits)
    assert close_ranking([h.score for h in hits], list(best.values()), k, tol=1e-6)
    for h in hits:
        i = int(h.message_id[1:])
        assert math.isclose(h.score, fused[i], rel_tol=1e-6, abs_tol=1e-9)
        assert (h.lexical is None) == (i not in lexical)
        if h.lexical is not None:
            assert math.isclose(h.lexical, lexical[i], rel_tol=1e-9)
        assert (h.similarity is None) == (i not in vector)
        if h.similarity is not None:
            assert math.isclose(h.similarity, vector[i], abs_tol=1e-6)


@given(
    lexical=st.dictionaries(st.integers(0, 20), st.floats(0.01, 50.0), max_size=12),
    vector=st.dictionaries(st.integers(0, 20), st.floats(-1.0, 1.0), max_size=12),
    weight=st.floats(0.0, 4.0),
)
def test_fuse_linear_matches_its_formula(
    lexical: dict[int, float], vector: dict[int, float], weight: float
) -> None:
    got = fuse_linear(list(lexical.items()), list(vector.items()), vector_weight=weight)
    want = linear(lexical, vector, weight)
    assert set(got) == set(want)
    for key, (score, lex, cos) in got.items():
        assert math.isclose(score, want[key], rel_tol=1e-9, abs_tol=1e-9)
        assert lex == lexical.get(key) and cos == vector.get(key)


def test_tie_ranks_share_a_rank_and_skip_after() -> None:
    assert tie_ranks([("a", 3.0), ("b", 3.0), ("c", 1.0)], relative=False, tol=0.0) == {
        "a": 1,
        "b": 1,
        "c": 3,
    }
    fused = fuse([("a", 2.0)], [("a", 0.5), ("b", 0.9)], rrf_k=0)
    assert fused == {"a": (1.0 + 0.5, 2.0, 0.5), "b": (1.0, None, 0.9)}
    fused = fuse([("a", 2.0)], [("a", 0.5), ("b", 0.9)], rrf_k=0, vector_weight=0.5)
    assert fused == {"a": (1.0 + 0.25, 2.0, 0.5), "b": (0.5, None, 0.9)}


def test_the_vector_weight_is_the_embedders_unless_given() -> None:
    class Declares:
        fusion_weight = 2.5

    assert vector_weight_of(object()) == VECTOR_WEIGHT
    assert vector_weight_of(Declares()) == 2.5
    assert vector_weight_of(Declares(), 0) == 0.0
    assert vector_weight_of(HashingEmbedder()) < 1.0  # weak cosines: BM25 leads
    for bad in (-1, float("nan"), float("inf"), "1", True):
        with pytest.raises(ConfigError, match="vector_weight="):
            vector_weight_of(Declares(), bad)
        with pytest.raises(ConfigError, match="vector_weight="):
            RecallIndex("sqlite://", vector_weight=bad)  # type: ignore[arg-type]


def test_query_terms_split_like_fts5_unicode61() -> None:
    assert query_terms("What's my_old ADDRESS? Café, café 42") == [
        "what",
        "s",
        "my",
        "old",
        "address",
        "café",
        "42",
    ]


def test_the_linear_weight_is_the_embedders_unless_given() -> None:
    class Declares:
        linear_weight = 0.75

        def embed(self, text: str) -> list[float]:
            return [1.0, float(len(text))]

    assert linear_weight_of(object()) == LINEAR_WEIGHT
    assert linear_weight_of(Declares()) == 0.75
    with RecallIndex("sqlite://", embedder=Declares()) as idx:
        assert idx._opts.vector_weight == 0.75
    with RecallIndex("sqlite://", embedder=Declares(), vector_weight=2) as idx:
        assert idx._opts.vector_weight == 2.0


def test_a_bad_fusion_is_named() -> None:
    with pytest.raises(ConfigError, match="fusion='sum'"):
        RecallIndex("sqlite://", fusion="sum")
