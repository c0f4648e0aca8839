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

Other questions keep their order. Measured by ``bench/longmem/run.py`` on its
development set (``rerank`` rows); its held-out set was never used to choose the words
or the weights. Fetch more candidates than you keep (``search(k=50)``, then ``k=10``
here) so a boost can bring a hit up from below the cut.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Final

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
    present, when = asks_present(query), asks_when(query)
    out = list(hits)
    if out and (present or when):
        lo = min(h.created_at for h in out)
        span = max(h.created_at for h in out) - lo
        scored = []
        for h in out:
            factor = 1.0
            if present and span > 0:
                factor += recency * (h.created_at - lo) / span
            if when and is_dated(h.text):
                factor += dated
            scored.append(h if factor == 1.0 else dataclasses.replace(h, score=h.score * factor))
        out = sorted(scored, key=lambda h: -h.score)
    return out if k is None else out[:k]
