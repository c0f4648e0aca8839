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

Two more, added to the fused score rather than multiplied (``boosts``):

- **Who**: a text that starts with a speaker's label ("Caroline: ...", how a transcript
  of several people is indexed) is raised by ``SPEAKER_BOOST`` when the question names
  that speaker and no other candidate's speaker ("What did *Caroline* research?").
- **Which month or year**: a question naming a month or a year ("What did Tim read in
  *January 2024*?") raises the items created in it by ``DATE_MATCH_BOOST`` (UTC).

Other questions keep their order. ``RecallIndex.search`` applies it (``rerank=True``,
the default) to its best ``candidates`` before cutting to ``k``, so a boost can bring a
hit up from below the cut. Measured by ``bench/longmem/run.py`` (``rerank`` rows before it
was wired in; its held-out set was never used to choose the words or the weights): never
below the plain fusion on either set, current-over-superseded +6 to +19 points.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Sequence
from typing import Final

from ._backend import Hit

RECENCY_BOOST: Final = 0.5
DATE_BOOST: Final = 0.3
SPEAKER_BOOST: Final = 0.4
DATE_MATCH_BOOST: Final = 0.2
"""Added to a fused score (the lexical list's best is 1): chosen on LoCoMo dev."""

_SPEAKER = re.compile(r"^\s*([A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,2}):\s")
_YEAR = re.compile(r"\b(1[89]\d\d|2\d\d\d)\b")

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


def speaker_of(text: str) -> str | None:
    """The label a transcript line starts with ("Caroline: hi" -> "caroline"), if any."""
    m = _SPEAKER.match(text)
    return m.group(1).lower() if m else None


def _dates_named(query: str) -> tuple[set[int], set[int]]:
    """The months (1-12, capitalized: "May", not "may") and the years a query names."""
    names = _MONTHS.split("|")
    months = {i + 1 for i, m in enumerate(names) if re.search(rf"\b{m.title()}\b", query)}
    return months, {int(y) for y in _YEAR.findall(query)}


def boosts(query: str, times: Sequence[float], texts: Sequence[str]) -> list[float] | None:
    """What each candidate (given by its time and text) adds to its fused score for
    ``query``: ``SPEAKER_BOOST`` when it is said by the one candidates' speaker the
    query names, ``DATE_MATCH_BOOST`` when it is from a month or year the query names;
    None when neither applies."""
    out = [0.0] * len(texts)
    speakers = [speaker_of(t) for t in texts]
    low = query.lower()
    named = {s for s in speakers if s and re.search(rf"\b{re.escape(s)}\b", low)}
    if len(named) == 1:
        out = [b + SPEAKER_BOOST * (s in named) for b, s in zip(out, speakers, strict=True)]
    months, years = _dates_named(query)
    if months or years:
        for i, at in enumerate(times):
            when = dt.datetime.fromtimestamp(at, dt.UTC)
            if (not months or when.month in months) and (not years or when.year in years):
                out[i] += DATE_MATCH_BOOST
    return out if any(out) else None


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
