"""DriftDetector: the opening topic and a running centroid vs each new message."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import ConfigError, EmbeddingError
from convomem.model import Message
from convomem.recall import DriftDetector, DriftResult, HashingEmbedder

EXAMPLES = int(os.environ.get("CONVOMEM_HYPOTHESIS_EXAMPLES", "40"))


class WordEmbedder:
    """One dimension per word of a fixed vocabulary: disjoint vocabularies are orthogonal."""

    def __init__(self, vocab: Sequence[str]) -> None:
        self.index = {w: i for i, w in enumerate(vocab)}
        self.batches = 0

    def embed(self, text: str) -> list[float]:
        v = [0.0] * len(self.index)
        for w in text.split():
            v[self.index[w]] += 1.0
        return v

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        self.batches += 1
        return [self.embed(t) for t in texts]


class TableEmbedder:
    """Text -> a given vector (for the brute-force centroid oracle)."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed(self, text: str) -> list[float]:
        return self.table[text]


A = [f"a{i}" for i in range(20)]
B = [f"b{i}" for i in range(20)]
WORDS = WordEmbedder(A + B)
sentence = st.lists(st.integers(0, 19), min_size=1, max_size=6)


def _a(ix: list[int]) -> str:
    return " ".join(A[i] for i in ix)


def _b(ix: list[int]) -> str:
    return " ".join(B[i] for i in ix)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.text(min_size=1, max_size=60).filter(str.strip),
    st.integers(2, 12),
    st.sampled_from(["ema", "window"]),
    st.floats(-1.0, 0.999),
)
def test_identical_messages_never_drift(text: str, n: int, mode: str, threshold: float) -> None:
    d = DriftDetector(threshold=threshold, centroid=mode)  # type: ignore[arg-type]
    for r in d.check_many([text] * n):
        assert not r.drifted and r.action == "none"
        assert r.similarity == pytest.approx(1.0) and r.score == pytest.approx(0.0, abs=1e-9)
    assert d.drifts == 0 and d.checks == n


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(sentence, min_size=1, max_size=8),
    sentence,
    st.sampled_from(["ema", "window"]),
    st.floats(0.01, 1.0),
)
def test_a_disjoint_vocabulary_drifts(
    opening: list[list[int]], other: list[int], mode: str, threshold: float
) -> None:
    d = DriftDetector(WORDS, threshold=threshold, centroid=mode)  # type: ignore[arg-type]
    d.check_many([_a(ix) for ix in opening])  # any talk in vocabulary A
    r = d.check(_b(other))
    assert r.drifted and r.action == "new_segment" and r.suggestion
    assert r.topic_similarity == 0.0 and r.centroid_similarity == 0.0 and r.score == 1.0


def test_a_topic_change_drifts_with_the_default_hashing_embedder() -> None:
    d = DriftDetector()
    on_topic = [
        "I want to book a flight to Paris in March",
        "Which airlines fly to Paris in March?",
        "Can I book a window seat on the Paris flight?",
    ]
    assert not any(r.drifted for r in d.check_many(on_topic))
    r = d.check("What is the best recipe for chocolate cake?")
    assert r.drifted and r.action == "new_segment"
    assert d.stats()["drifts"] == 1 and d.stats()["last"]["drifted"] is True


def test_a_return_to_the_opening_topic_widens_recall() -> None:
    d = DriftDetector(WORDS, centroid="window", window=3)
    d.check(_a([0, 1, 2]))
    for i in range(4):
        d.check(_a([0]) + " " + _b([i, i + 1, i + 2, i + 3]))  # drifts away gradually
    r = d.check(_a([0, 1, 2]))
    assert not r.drifted and r.topic_similarity == pytest.approx(1.0)
    assert r.centroid_similarity < d.threshold and r.action == "widen_recall"


vectors = st.lists(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=3, max_size=3).filter(
        lambda v: math.sqrt(sum(x * x for x in v)) > 1e-3
    ),
    min_size=1,
    max_size=12,
)


def _unit(v: list[float]) -> list[float]:
    n = math.sqrt(math.fsum(x * x for x in v))
    return [x / n for x in v]


def _cos(u: list[float], c: list[float]) -> float:
    n = math.sqrt(math.fsum(x * x for x in c))
    return 0.0 if n == 0 else math.fsum(a * b for a, b in zip(u, c, strict=True)) / n


@settings(max_examples=EXAMPLES, deadline=None)
@given(vectors, st.floats(0.01, 1.0), st.integers(1, 5))
def test_centroids_match_a_brute_force_mean(vs: list[list[float]], alpha: float, w: int) -> None:
    table = {f"t{i}": v for i, v in enumerate(vs)}
    ema = DriftDetector(TableEmbedder(table), centroid="ema", alpha=alpha)
    win = DriftDetector(TableEmbedder(table), centroid="window", window=w)
    units = [_unit(v) for v in vs]
    for k in range(len(vs)):
        r_ema, r_win = ema.check(f"t{k}"), win.check(f"t{k}")
        if k:
            # the message is compared with the centroid of the messages before it
            c = units[0]
            for u in units[1:k]:
                c = [(1 - alpha) * a + alpha * b for a, b in zip(c, u, strict=True)]
            assert r_ema.centroid_similarity == pytest.approx(_cos(units[k], c), abs=1e-9)
            last = units[max(0, k - w) : k]
            mean = [math.fsum(col) / len(last) for col in zip(*last, strict=True)]
            assert r_win.centroid_similarity == pytest.approx(_cos(units[k], mean), abs=1e-9)
            assert r_ema.topic_similarity == pytest.approx(_cos(units[k], units[0]), abs=1e-9)
    c = units[0]
    for u in units[1:]:
        c = [(1 - alpha) * a + alpha * b for a, b in zip(c, u, strict=True)]
    assert ema.centroid == pytest.approx(tuple(c), abs=1e-9)
    last = units[-w:]
    mean = [math.fsum(col) / len(last) for col in zip(*last, strict=True)]
    assert win.centroid == pytest.approx(tuple(mean), abs=1e-9)


def test_blank_messages_change_nothing_and_batches_embed_once() -> None:
    emb = WordEmbedder(A + B)
    d = DriftDetector(emb)
    results = d.check_many(["", _a([1]), "   ", Message("m", "assistant", content=""), _a([1])])
    assert [r.index for r in results] == [0, 1, 1, 1, 2]
    assert d.checks == 2 and d.embedded == 2 and emb.batches == 1


def test_async_twin_gives_the_same_results() -> None:
    class AsyncWords:
        async def aembed(self, text: str) -> list[float]:
            return WORDS.embed(text)

    texts = [_a([1, 2]), _a([2, 3]), _b([4]), _a([1])]
    sync = DriftDetector(WORDS).check_many(texts)

    async def run() -> list[DriftResult]:
        d = DriftDetector(AsyncWords())
        return [await d.acheck(t) for t in texts]

    assert asyncio.run(run()) == sync
    with pytest.raises(EmbeddingError, match="async only"):
        DriftDetector(AsyncWords()).check("a1")


def test_the_seed_interface() -> None:
    d = DriftDetector(HashingEmbedder(), threshold=0.3)
    d.set_initial_topic("refund for order 1182")
    out = d.check_drift("refund for order 1182")
    assert out["drifted"] is False and out["similarity"] == pytest.approx(1.0)
    assert out["suggestion"] is None and out["index"] == 2


def test_bad_options_and_vectors_are_named() -> None:
    with pytest.raises(ConfigError, match="threshold=2"):
        DriftDetector(threshold=2)
    with pytest.raises(ConfigError, match="centroid='mean'"):
        DriftDetector(centroid="mean")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="embedder="):
        DriftDetector(42)  # type: ignore[arg-type]
    d = DriftDetector(TableEmbedder({"x": [1.0, 0.0], "y": [1.0, 0.0, 0.0], "z": ["a"]}))  # type: ignore[list-item]
    d.check("x")
    with pytest.raises(EmbeddingError, match="3 numbers"):
        d.check("y")
    with pytest.raises(EmbeddingError, match="expected numbers"):
        d.check("z")
    with pytest.raises(EmbeddingError, match="messages\\[0\\]"):
        d.check(3)  # type: ignore[arg-type]


@settings(max_examples=EXAMPLES // 2 + 1, deadline=None)
@given(
    st.lists(st.one_of(sentence.map(_a), sentence.map(_b), st.just("")), max_size=10),
    st.integers(0, 10),
    st.sampled_from(["ema", "window"]),
)
def test_state_resumes_exactly(texts: list[str], cut: int, mode: str) -> None:
    import json

    a = DriftDetector(WORDS, centroid=mode, window=3)  # type: ignore[arg-type]
    a.check_many(texts[:cut])
    b = DriftDetector(WORDS, centroid=mode, window=3)  # type: ignore[arg-type]
    b.load_state(json.loads(json.dumps(a.state())))
    assert b.check_many(texts[cut:]) == a.check_many(texts[cut:])
    assert b.stats() == a.stats()


def test_bad_state_is_named_and_changes_nothing() -> None:
    d = DriftDetector(WORDS)
    d.check(_a([1]))
    before = d.state()
    with pytest.raises(ConfigError, match="not a DriftDetector state"):
        d.load_state({"format": "x"})
    with pytest.raises(ConfigError, match="'window'"):
        DriftDetector(WORDS, window=2).load_state(before)
    with pytest.raises(ConfigError, match="'topic'"):
        d.load_state({**before, "topic": "nope"})
    with pytest.raises(ConfigError, match="different lengths"):
        d.load_state({**before, "ema": [1.0]})
    assert d.state() == before
