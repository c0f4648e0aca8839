"""The recall ranking written out in plain Python, for the brute-force oracles of
``tests/recall``: BM25F over one user's items and their session neighbours (every item
scored, no index), the linear fusion, and the distinct-text cut.

Items are given in insertion order, each with its session and seq; an item's neighbours
are the items just before and after it in its session (in seq order when both have one),
as the partition links them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from convomem.recall.analyze import terms
from convomem.recall.fusion import K1, NEXT_WEIGHT, PREV_WEIGHT, B


def neighbours(sessions: Sequence[tuple[str, int | None]]) -> tuple[list[int], list[int]]:
    """``(prev, next)`` item of each ``(session, seq)`` item, -1 for none."""
    prev = [-1] * len(sessions)
    nxt = [-1] * len(sessions)
    last: dict[str, tuple[int, int | None]] = {}
    for i, (sid, seq) in enumerate(sessions):
        before = last.get(sid)
        if before is not None and (seq is None or before[1] is None or seq > before[1]):
            prev[i], nxt[before[0]] = before[0], i
        if before is None or prev[i] >= 0:
            last[sid] = (i, seq)
    return prev, nxt


def bm25f(
    texts: Sequence[str], sessions: Sequence[tuple[str, int | None]], query_terms: Sequence[str]
) -> list[float]:
    """Each item's BM25F score for the query's terms (0: no term in its document)."""
    docs = [terms(t) for t in texts]
    prev, nxt = neighbours(sessions)
    n = len(docs)

    def tf(i: int, term: str) -> float:
        f = float(docs[i].count(term))
        if prev[i] >= 0:
            f += PREV_WEIGHT * docs[prev[i]].count(term)
        if nxt[i] >= 0:
            f += NEXT_WEIGHT * docs[nxt[i]].count(term)
        return f

    dl = []
    for i in range(n):
        d = float(len(docs[i]))
        if prev[i] >= 0:
            d += PREV_WEIGHT * len(docs[prev[i]])
        if nxt[i] >= 0:
            d += NEXT_WEIGHT * len(docs[nxt[i]])
        dl.append(d)
    avgdl = max(sum(dl) / n, 1e-9)
    scores = [0.0] * n
    for term in dict.fromkeys(query_terms):
        f = [tf(i, term) for i in range(n)]
        df = sum(x > 0 for x in f)
        if not df:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for i in range(n):
            if f[i]:
                norm = K1 * (1.0 - B + B * dl[i] / avgdl)
                scores[i] += idf * (f[i] * (K1 + 1.0)) / (f[i] + norm)
    return scores


def linear(lexical: dict[Any, float], vector: dict[Any, float], weight: float) -> dict[Any, float]:
    """lexical / best + weight * (cosine - lowest) / (best - lowest), over both lists."""
    top = max(lexical.values(), default=0.0)
    hi, lo = max(vector.values(), default=0.0), min(vector.values(), default=0.0)
    out = {}
    for key in {*lexical, *vector}:
        s = lexical[key] / top if key in lexical and top > 0 else 0.0
        if key in vector:
            s += weight * ((vector[key] - lo) / (hi - lo) if hi - lo > 1e-6 else 1.0)
        out[key] = s
    return out


def close_ranking(got: Sequence[float], want: Sequence[float], k: int, tol: float = 1e-9) -> bool:
    """Whether ``got`` (the scores of the hits, in order) are the ``k`` best of ``want``
    (every item's oracle score) up to float rounding: non-increasing, and each equal to
    the oracle's score of the same rank."""
    best = sorted(want, reverse=True)[:k]
    return len(got) == len(best) and all(
        math.isclose(g, w, rel_tol=tol, abs_tol=tol) for g, w in zip(got, best, strict=True)
    )
