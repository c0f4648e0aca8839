"""Query-aware reordering of recall hits: the present for "now" questions, dated turns for
"when" questions.

Fusion ranks by what a hit says, not by when it was said. Two kinds of question need
more, and both are cheap to recognize from the query's words:

- **The present** ("which gym do I go to *now*?", "what diet am I on *these days*?"): a
  value that changed was stated twice, and the old statement often matches the question
  as well as the new one. Each hit's score is raised by up to ``recency`` of itself, in
  proportion to how late it is within the candidates' time span, so the newer of two
  similar statements wins without burying a strong old match.
- **When** ("*when* did I run the half marathon?"): the turn that answers carries a date
  ("on March 13", "yesterday", "last Tuesday", "2026-03-13"); hits with one are raised
  by ``dated`` of their score.

Other questions keep their order. ``RecallIndex.search`` applies it (``rerank=True``,
the default) to its best ``candidates`` before cutting to ``k``, so a boost can bring a
hit up from below the cut. Measured by ``bench/longmem/run.py`` (``rerank`` rows before it
was wired in; its held-out set was never used to choose the words or the weights): never
below the plain fusion on either set, current-over-superseded +6 to +19 points.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # _core calls factors(); rerank() only handles its hits
    from ._core import Hit

RECENCY_BOOST: Final = 0.5
DATE_BOOST: Final = 0.3

_PRESENT = re.compile(
    r"\b(now|nowadays|current|currently|these days|anymore|any more|latest|still|"
    r"ahora|actualmente|maintenant|actuellement|jetzt|derzeit|aktuell)\b",
    re.IGNORECASE,
)
_WHEN = re.compile(
    r"^\W*(when|cuándo|cuando|quand|wann)\b|\b(what|which) (day|date|month|year)\b"
    r"|\bhow long ago\b",
    re.IGNORECASE,
)
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_DATED = re.compile(
    rf"\b({_MONTHS}|{_DAYS}|yesterday|today|tonight|this morning|this afternoon|"
    r"\w+ (days|weeks|months|years) ago|last (week|month|year|night|weekend)|"
    r"ayer|hoy|hier|aujourd'hui|gestern|heute)\b"
    r"|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(/\d{2,4})?\b",
    re.IGNORECASE,
)


def asks_present(query: str) -> bool:
    """Whether ``query`` asks about the current state of something."""
    return _PRESENT.search(query) is not None


def asks_when(query: str) -> bool:
    """Whether ``query`` asks for a date or a time."""
    return _WHEN.search(query) is not None


def is_dated(text: str) -> bool:
    """Whether ``text`` states a date (absolute or relative)."""
    return _DATED.search(text) is not None


def factors(
    query: str,
    times: Sequence[float],
    texts: Sequence[str],
    *,
    recency: float = RECENCY_BOOST,
    dated: float = DATE_BOOST,
) -> list[float] | None:
    """Each candidate's score multiplier for ``query`` (candidates given by their times
    and texts); None when the query asks neither about the present nor "when"."""
    present, when = asks_present(query), asks_when(query)
    if not times or not (present or when):
        return None
    lo = min(times)
    span = max(times) - lo
    out = []
    for at, text in zip(times, texts, strict=True):
        factor = 1.0
        if present and span > 0:
            factor += recency * (at - lo) / span
        if when and is_dated(text):
            factor += dated
        out.append(factor)
    return out


def rerank(
    hits: Sequence[Hit],
    query: str,
    *,
    k: int | None = None,
    recency: float = RECENCY_BOOST,
    dated: float = DATE_BOOST,
) -> list[Hit]:
    """``hits`` (best first) reordered for ``query``, the first ``k`` of them (all with
    None); boosted hits carry their new score. Equal scores keep their order."""
    out = list(hits)
    by = factors(
        query, [h.created_at for h in out], [h.text for h in out], recency=recency, dated=dated
    )
    if by is not None:
        scored = [
            h if f == 1.0 else dataclasses.replace(h, score=h.score * f)
            for h, f in zip(out, by, strict=True)
        ]
        out = sorted(scored, key=lambda h: -h.score)
    return out if k is None else out[:k]
