"""The benchmark's metrics, as plain functions over ranked message ids (checked by hand-made
cases in ``tests/bench/test_longmem.py``).

- ``recall_any(ranked, evidence, k)``: at least one evidence id is among the first ``k``
  (LongMemEval's recall_any@k); ``recall_all``: every one is.
- ``ndcg(ranked, evidence, k)``: binary relevance, DCG = sum 1/log2(rank + 1) over the
  evidence ids in the first ``k``, over the ideal DCG of min(len(evidence), k) hits.
- ``current_first(ranked, current, superseded, k)``: a knowledge update's current
  statement is in the first ``k`` and ranks above every superseded statement (a
  superseded one ranked lower or absent is fine).
- Abstention: a question is *abstained* when its signal (the best hit's cosine to the
  question) is below a threshold. ``calibrate`` picks the threshold that classifies the
  development questions best (abstention vs answerable, ties to the lower threshold);
  the held-out set reuses it. ``abstention`` gives precision (abstained questions that
  were abstention questions) and recall (abstention questions abstained).
- ``holds(text, must)``: every required string is in the text (case-folded).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def recall_any(ranked: Sequence[str], evidence: Sequence[str], k: int) -> bool:
    top = set(ranked[:k])
    return any(e in top for e in evidence)


def recall_all(ranked: Sequence[str], evidence: Sequence[str], k: int) -> bool:
    top = set(ranked[:k])
    return bool(evidence) and all(e in top for e in evidence)


def ndcg(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    relevant = set(evidence)
    if not relevant:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, mid in enumerate(ranked[:k]) if mid in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal


def current_first(
    ranked: Sequence[str], current: Sequence[str], superseded: Sequence[str], k: int
) -> bool:
    top = list(ranked[:k])
    pos = [top.index(c) for c in current if c in top]
    if not pos:
        return False
    old = [top.index(s) for s in superseded if s in top]
    return not old or min(pos) < min(old)


def calibrate(answerable: Sequence[float], abstain: Sequence[float]) -> float:
    """The threshold ``t`` (abstain when signal < t) with the most questions classified
    right; among equals the lowest (abstain least)."""
    candidates = sorted({*answerable, *abstain, math.inf})
    best, best_t = -1, 0.0
    for t in [min(candidates) - 1.0, *candidates]:
        right = sum(s >= t for s in answerable) + sum(s < t for s in abstain)
        if right > best:
            best, best_t = right, t
    return best_t


def abstention(
    signals: Sequence[float], is_abstention: Sequence[bool], threshold: float
) -> tuple[float, float, int]:
    """(precision, recall, how many abstained) of abstaining when signal < threshold;
    precision is 0.0 when nothing was abstained."""
    abstained = [a for s, a in zip(signals, is_abstention, strict=True) if s < threshold]
    total = sum(is_abstention)
    precision = sum(abstained) / len(abstained) if abstained else 0.0
    recall = sum(abstained) / total if total else 0.0
    return precision, recall, len(abstained)


def holds(text: str, must: Sequence[str]) -> bool:
    folded = text.casefold()
    return bool(must) and all(m.casefold() in folded for m in must)


def rate(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")
