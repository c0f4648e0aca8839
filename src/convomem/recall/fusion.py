"""Hybrid ranking: query terms, tie-aware ranks and reciprocal rank fusion.

Every backend hands its lexical (BM25-like) and vector (cosine) candidates to
``fuse``, so the final ranking is defined once, here, and is the same on every backend:
``score(d) = sum over lists of weight / (rrf_k + rank(d))`` (weighted RRF: the vector
list's weight is what the embedder declares, ``fusion_weight``; a feature-hashing
embedder's cosines are weak evidence next to BM25, a trained model's strong). Ranks are
tie-aware (competition ranking, "1224"): items whose scores differ by less than the list's
tolerance share a rank, so the order in which a database returns equal scores cannot
change the result.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import Final, TypeVar

K = TypeVar("K", bound=Hashable)

RRF_K: Final = 60
"""The constant of reciprocal rank fusion (Cormack et al., 2009)."""
VECTOR_WEIGHT: Final = 1.0
"""The vector list's weight (the lexical list's is 1) for an embedder that declares none."""

LEXICAL_TOLERANCE: Final = 1e-9
"""Relative tolerance under which two BM25 scores count as equal."""
VECTOR_TOLERANCE: Final = 1e-6
"""Absolute tolerance under which two cosines count as equal (float32 storage)."""

K1: Final = 1.2
B: Final = 0.75
"""BM25's term-frequency saturation and length normalization, in both backends."""
PREV_WEIGHT: Final = 0.7
NEXT_WEIGHT: Final = 0.5
"""The weights of an item's neighbours' terms in its BM25F document (its own: 1): the
item before it in its session (often the question it answers) and the one after (chosen
on LoCoMo dev; see bench/README.md)."""
LINEAR_WEIGHT: Final = 0.25
"""The vector list's weight in the linear fusion (``fuse_linear``), the lexical list's
being 1, for an embedder that declares none (``linear_weight``): learned on LoCoMo dev
for the static and hashing embedders (0.1-0.5 within a point of each other)."""
_WORD = re.compile(r"[^\W_]+")
MAX_TERMS: Final = 64


def query_terms(text: str) -> list[str]:
    """The distinct lowercase word tokens of ``text`` (letters and digits, as FTS5's
    ``unicode61`` tokenizer splits them), in order, at most ``MAX_TERMS``."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        seen.setdefault(word, None)
        if len(seen) >= MAX_TERMS:
            break
    return list(seen)


def tie_ranks(scored: Sequence[tuple[K, float]], *, relative: bool, tol: float) -> dict[K, int]:
    """Competition ranks (1 = best, higher score is better) of ``(key, score)`` pairs;
    scores within ``tol`` (relative to the larger magnitude when ``relative``) tie."""
    ordered = sorted(scored, key=lambda kv: -kv[1])
    ranks: dict[K, int] = {}
    lead = 0.0
    rank = 0
    for i, (key, score) in enumerate(ordered):
        slack = tol * max(abs(lead), abs(score), 1e-300) if relative else tol
        if i == 0 or lead - score > slack:
            rank, lead = i + 1, score
        ranks[key] = rank
    return ranks


def fuse(
    lexical: Sequence[tuple[K, float]],
    vector: Sequence[tuple[K, float]],
    *,
    rrf_k: int = RRF_K,
    lexical_weight: float = 1.0,
    vector_weight: float = 1.0,
) -> dict[K, tuple[float, float | None, float | None]]:
    """Weighted reciprocal rank fusion of a lexical and a vector candidate list (higher
    scores are better in both): ``{key: (fused, lexical score or None, cosine or None)}``."""
    lex = dict(lexical)
    vec = dict(vector)
    out: dict[K, tuple[float, float | None, float | None]] = {}
    lranks = tie_ranks(lexical, relative=True, tol=LEXICAL_TOLERANCE)
    vranks = tie_ranks(vector, relative=False, tol=VECTOR_TOLERANCE)
    for key in {**lranks, **vranks}:
        score = 0.0
        lr, vr = lranks.get(key), vranks.get(key)
        if lr is not None:
            score += lexical_weight / (rrf_k + lr)
        if vr is not None:
            score += vector_weight / (rrf_k + vr)
        out[key] = (score, lex.get(key), vec.get(key))
    return out


def linear_weight_of(embedder: object) -> float:
    """The vector list's weight in a linear fusion: the embedder's ``linear_weight``
    (a trained model's, learned on the dev sets), else ``LINEAR_WEIGHT``."""
    return vector_weight_of(embedder, getattr(embedder, "linear_weight", LINEAR_WEIGHT))


def vector_weight_of(embedder: object, override: object = None) -> float:
    """The vector list's weight: ``override`` when given, else the embedder's declared
    ``fusion_weight``, else ``VECTOR_WEIGHT``. A number >= 0 (0: vectors only break
    lexical ties and add what BM25 does not find, after all it finds)."""
    from ..errors import ConfigError

    value = getattr(embedder, "fusion_weight", VECTOR_WEIGHT) if override is None else override
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"vector_weight={value!r}: must be a number >= 0")
    out = float(value)
    if not 0.0 <= out < float("inf"):
        raise ConfigError(f"vector_weight={value!r}: must be a number >= 0")
    return out


FUSIONS: Final = ("linear", "rrf")
"""How the two candidate lists combine: ``"linear"`` (``fuse_linear``, the default) or
``"rrf"`` (``fuse``, reciprocal rank fusion)."""


def fuse_linear(
    lexical: Sequence[tuple[K, float]],
    vector: Sequence[tuple[K, float]],
    *,
    vector_weight: float = LINEAR_WEIGHT,
) -> dict[K, tuple[float, float | None, float | None]]:
    """Linear fusion of a lexical and a vector candidate list, each scaled to [0, 1]:
    ``lexical / best lexical + vector_weight * (cosine - lowest) / (best - lowest)``
    over the union of the lists (an item missing from a list scores 0 in it: it is
    below that list's last). Scores keep what RRF throws away, how far apart two
    candidates are: a turn that matches the question's rare words by a wide margin stays
    first (LoCoMo dev recall@10: 0.813 linear against 0.763 RRF, BM25 + MiniLM).
    ``{key: (fused, lexical score or None, cosine or None)}``."""
    lex = dict(lexical)
    vec = dict(vector)
    top = max(lex.values(), default=0.0)
    hi, lo = max(vec.values(), default=0.0), min(vec.values(), default=0.0)
    span = hi - lo
    out: dict[K, tuple[float, float | None, float | None]] = {}
    for key in {**lex, **vec}:
        score = 0.0
        ls, vs = lex.get(key), vec.get(key)
        if ls is not None and top > 0.0:
            score += ls / top
        if vs is not None:
            score += vector_weight * ((vs - lo) / span if span > VECTOR_TOLERANCE else 1.0)
        out[key] = (score, ls, vs)
    return out
