"""``StaticEmbedder``: all-MiniLM-L6-v2 distilled into one vector per token, shipped in
the package; the default embedder of a ``RecallIndex``.

A transformer costs ~1.3 GFLOP per 30-token text: on two cores, tens of texts a second,
and tens of milliseconds for a search's query. A static model looks each WordPiece
token up in a table and takes a weighted mean: ~100,000 texts a second and microseconds
a query, so neither ingest nor search waits for it. The table was distilled once from
MiniLM (``scripts/distill_static.py``: each token through the model alone, as Model2Vec
does; PCA to 64 dimensions, int8, a SIF weight per token) and ships in the wheel
(``recall/data``, 2.1 MB); numpy is the only dependency and nothing is downloaded.

On LoCoMo dev (real conversations) its cosines alone find an evidence turn in the top 10
for about 0.54 of the questions (MiniLM itself 0.56); fused with BM25F they add about
two points, as much as MiniLM's or E5's (bench/README.md, 2026-12-03).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Final

from ..errors import EmbeddingError, MissingDependency
from ._wordpiece import WordPiece

__all__ = ["StaticEmbedder"]

TABLE: Final = Path(__file__).resolve().parent / "data" / "static-minilm-64.npz"
_SPECIAL: Final = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class _Table:
    """The token vectors (float32, each row scaled by its token's weight) and the
    tokenizer, loaded once per process (``load``)."""

    _lock = threading.Lock()
    _loaded: ClassVar[dict[Path, _Table]] = {}

    def __init__(self, np: Any, path: Path) -> None:
        with np.load(path) as data:
            vocab = bytes(data["vocab"]).decode("utf-8").split("\n")
            rows = data["vectors"].astype(np.float32)
            rows *= (data["scales"] * data["weights"])[:, None]
        self.tokenizer = WordPiece(vocab)
        for name in _SPECIAL:
            i = self.tokenizer.ids.get(name)
            if i is not None:
                rows[i] = 0.0  # no special token counts
        self.rows = rows

    @classmethod
    def load(cls, np: Any, path: Path) -> _Table:
        with cls._lock:
            table = cls._loaded.get(path)
            if table is None:
                table = cls._loaded[path] = cls(np, path)
            return table


class StaticEmbedder:
    """Static token embeddings distilled from all-MiniLM-L6-v2 (64 numbers, unit
    length); see the module docstring. ``table`` is another ``.npz`` made by
    ``scripts/distill_static.py`` (default: the one shipped).

    ``recall_keys``: the message alone (a mean of token vectors gains little from a
    text's sentences, and each key costs a column in the search's scan). The fusion
    weight is ``fusion.LINEAR_WEIGHT`` (learned on LoCoMo dev with this embedder).
    """

    recall_keys: tuple[str, ...] = ("message",)
    fusion_weight: float = 1.0
    """Its weight in the reciprocal-rank fusion (``RecallIndex(fusion="rrf")``)."""

    def __init__(self, table: str | Path | None = None) -> None:
        try:
            import numpy as np
        except ImportError:
            raise MissingDependency("StaticEmbedder", "recall", "numpy") from None
        self._np = np
        self.path = TABLE if table is None else Path(table)
        self.dim = 64
        self.name = "static-minilm-l6-64" if table is None else f"static:{self.path.name}"
        self._table: _Table | None = None

    def _loaded(self) -> _Table:
        if self._table is None:
            self._table = _Table.load(self._np, self.path)
            self.dim = int(self._table.rows.shape[1])
        return self._table

    def embed_batch(self, texts: Sequence[str]) -> Any:
        """The unit vectors of ``texts`` (a float32 matrix, one row per text; a text
        without a known token is the zero vector)."""
        np = self._np
        table = self._loaded()
        ids: list[int] = []
        counts = []
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise EmbeddingError(f"texts[{i}]={t!r}: must be a string")
            got = table.tokenizer.encode(t)
            ids += got
            counts.append(len(got))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if ids:
            rows = table.rows[np.array(ids, dtype=np.int64)]
            ends = np.cumsum(counts)
            has = np.array(counts) > 0
            sums = np.add.reduceat(rows, (ends - counts)[has], axis=0)
            out[has] = sums
        norms = np.sqrt((out * out).sum(axis=1, keepdims=True))
        return out / np.where(norms > 0, norms, 1.0)

    def embed(self, text: str) -> list[float]:
        """The unit vector of one text."""
        row: list[float] = self.embed_batch([text])[0].tolist()
        return row

    def __repr__(self) -> str:
        return "StaticEmbedder()" if self.path == TABLE else f"StaticEmbedder({str(self.path)!r})"
