"""``StaticEmbedder``: its WordPiece tokenizer against HF ``tokenizers`` (BERT's
normalizer, pre-tokenizer and WordPiece model over the same vocabulary), and its vectors:
unit length (zero for a text without a known token), one text the same alone or in a
batch, and what it is for: a paraphrase nearer than an unrelated text."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convomem.errors import EmbeddingError
from convomem.recall import RecallIndex, StaticEmbedder
from convomem.recall.static import TABLE, _Table

tokenizers = pytest.importorskip("tokenizers")  # the hf extra, in dev


@pytest.fixture(scope="module")
def reference() -> tuple[object, object]:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece as HFWordPiece

    table = _Table.load(np, TABLE)
    tok = Tokenizer(HFWordPiece(vocab=table.tokenizer.ids, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok, table.tokenizer


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        # characters Unicode 3.2 already had: the two sides' Unicode tables differ in
        # version, and a mark or format character assigned since (81 in the BMP, e.g. NKo
        # and new Arabic marks) is unknown to one side and absent to the other
        alphabet=st.sampled_from(list("abcXYZ01 .,!?'-_\t\néüßñ東京😀$%"))
        | st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)).filter(
            lambda c: unicodedata.ucd_3_2_0.category(c) != "Cn"
        ),
        max_size=40,
    )
)
def test_wordpiece_matches_the_reference_tokenizer(
    reference: tuple[object, object], text: str
) -> None:
    tok, ours = reference
    assert ours.encode(text) == tok.encode(text).ids  # type: ignore[attr-defined]


def test_fixed_texts_tokenize_like_the_reference(reference: tuple[object, object]) -> None:
    tok, ours = reference
    for text in ("Caroline: I went to a LGBTQ support group!", "naïve café déjà-vu", "x" * 150):
        assert ours.encode(text) == tok.encode(text).ids  # type: ignore[attr-defined]


def test_vectors_are_unit_or_zero_and_batch_independent() -> None:
    emb = StaticEmbedder()
    texts = ["We adopted a puppy last week", "", "!!!", "the invoice total was 45 dollars"]
    mat = emb.embed_batch(texts)
    assert mat.shape == (4, emb.dim) and mat.dtype == np.float32
    norms = np.linalg.norm(mat, axis=1)
    assert np.allclose(norms[[0, 3]], 1.0, atol=1e-5) and norms[1] == 0.0
    for i, t in enumerate(texts):
        assert np.allclose(emb.embed(t), mat[i], atol=1e-6)


def test_a_paraphrase_is_nearer_than_an_unrelated_text() -> None:
    emb = StaticEmbedder()
    for query, para, other in (
        ("which instrument does she play", "she practices the violin daily", "our flight left"),
        ("where did she travel", "her trip to Paris was lovely", "I bake bread on sundays"),
        (
            "what sport does he play",
            "he scored in the basketball game",
            "the printer is out of ink",
        ),
    ):
        q, p, o = emb.embed_batch([query, para, other])
        assert float(q @ p) > float(q @ o)


def test_bad_input_is_an_embedding_error() -> None:
    with pytest.raises(EmbeddingError, match=r"texts\[1\]"):
        StaticEmbedder().embed_batch(["ok", 3])  # type: ignore[list-item]


def test_it_is_the_default_embedder_of_an_index() -> None:
    with RecallIndex("sqlite://") as idx:
        assert isinstance(idx._opts.embedder, StaticEmbedder)
        assert idx.backend.model == "static-minilm-l6-64"
