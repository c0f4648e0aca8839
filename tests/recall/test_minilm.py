"""MiniLMEmbedder: the real all-MiniLM-L6-v2 in numpy, from the weights package (no
network), held to the model card's published similarities."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from convomem.errors import ConfigError
from convomem.model import Message
from convomem.recall import RecallIndex
from convomem.recall.minilm import MiniLMEmbedder, load_safetensors


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_matches_the_published_similarities(minilm: MiniLMEmbedder) -> None:
    # sentence-transformers' quickstart with all-MiniLM-L6-v2 prints these cosines.
    texts = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    m = minilm.embed_batch(texts)
    sims = m @ m.T
    assert sims[0, 1] == pytest.approx(0.6660, abs=2e-4)
    assert sims[0, 2] == pytest.approx(0.1046, abs=2e-4)
    assert sims[1, 2] == pytest.approx(0.1411, abs=2e-4)
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    # padding inside a batch changes nothing
    assert np.allclose(minilm.embed(texts[2]), m[2], atol=1e-5)


def test_recall_finds_a_paraphrase(minilm: MiniLMEmbedder) -> None:
    facts = [
        "I can't eat peanuts, they make me really sick",
        "The invoice came to 45 dollars",
        "We took the night train to Paris",
        "My sister lives in Lisbon",
    ]
    with RecallIndex("sqlite://", embedder=minilm) as idx:
        idx.add(
            [Message(f"m{i}", "user", content=t) for i, t in enumerate(facts)],
            user_id="u",
            session_id="s",
        )
        hits = idx.search("food allergy", user_id="u", k=4)  # no word in common with m0
        assert hits[0].message_id == "m0" and hits[0].lexical is None
        assert hits[0].similarity is not None
        assert hits[0].similarity > max((h.similarity or 0.0 for h in hits[1:]), default=0.0) + 0.1


def test_bad_model_dir_and_the_safetensors_reader(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"model\.safetensors"):
        MiniLMEmbedder(tmp_path)
    data = np.arange(6, dtype="<f4").tobytes()
    header = json.dumps({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}).encode()
    (tmp_path / "t.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + data)
    got = load_safetensors(np, tmp_path / "t.safetensors")
    assert got["a"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
