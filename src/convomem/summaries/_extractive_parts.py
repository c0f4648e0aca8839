"""Parts of the extractive summarizer that keep the point whole.

- ``display(text, tool)``: a tool result that is JSON reads as its fields ("forecast:
  light rain; high c: 32"), so a value is never cut inside a brace.
- ``pieces(sentence, cap, count)``: a sentence longer than ``cap`` tokens as its clauses
  (after ``;`` and ``,``, before a conjunction), packed back together up to ``cap`` as
  written; a clause longer than ``cap`` is dropped whole, never cut: a summary holds a
  value entirely or not at all.
- ``chatter(words)``: whether a sentence's words are only greetings, thanks and praise
  ("Hey John, long time no talk!", "Way to go, Maria!").
- ``headline(...)``: the one line a segment starts with, saying what it covers
  ("Covers: order 4417: refund R-4417-1 of $14.95 approved"): the segment's most
  mentioned reference, then the first clause of its chosen sentence that records a
  decision (approved, shipped, booked...) without its auxiliaries; none without one.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable, Iterable
from typing import Final

from ._tool_rules import tool_facts


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


HEADLINE: Final = "Covers: "
"""The prefix of a segment's first line; a merge makes a new one and drops the old."""

_CLAUSE = re.compile(
    r"(?<=[;,])\s+|\s+(?=(?:and|but|so|because|while|which|who|although|though|whereas)\s)"
)
_DECISION = re.compile(
    r"(?i:\b(?:approved|refunded|refund(?:ed)?\s+issued|shipped|cancel(?:l)?ed|closed|opened"
    r"|booked|confirmed|delivered|paid|agreed|decided|scheduled|resolved|replaced|issued"
    r"|returned|declined|rejected|accepted|changed|fixed|signed|renewed|upgraded|ordered"
    r"|completed|arrived|escalated|reopened|rescheduled|credited|charged)\b)"
)
_AUX = re.compile(
    r"(?i:\s+(?:is|are|was|were|has\s+been|have\s+been|had\s+been|will\s+be|got|been)\b)"
)
_HEAD_CLAUSE = re.compile(r",\s+|;\s+|\s+(?:and|but|so|which)\s+")


def display(text: str, tool: bool) -> str:
    """``text``, or a tool result's JSON as ``field: value`` pairs."""
    stripped = text.strip()
    if not tool or stripped[:1] not in "{[":
        return text
    return _fields(stripped) or text


@functools.lru_cache(maxsize=2048)
def _fields(stripped: str) -> str:
    """A JSON text's fields ("" when it is not JSON or has none); memoized, since a tool
    result is read by a compression, a fold and the ledger's scan."""
    try:
        json.loads(stripped)
    except ValueError:
        return ""
    fields = tool_facts(stripped)
    return "; ".join(f"{k}: {v}" for k, v in fields) + "." if fields else ""


def pieces(sentence: str, cap: int, count: Callable[[str], int]) -> list[tuple[int, int]]:
    """``[(start, end)]`` of ``sentence`` itself when it fits ``cap``, else of its clauses
    (split after ``;`` and ``,`` and before a conjunction) packed back together up to
    ``cap``, as written; a clause over ``cap`` is left out whole."""
    if count(sentence) <= cap:
        return [(0, len(sentence))]
    cuts = [0, *(m.start() for m in _CLAUSE.finditer(sentence)), len(sentence)]
    clauses = [t for a, b in itertools.pairwise(cuts) if (t := _trim(sentence, a, b))]
    sizes = [count(sentence[a:b]) for a, b in clauses]
    out: list[tuple[int, int]] = []
    run: list[int] = []  # clause indices packed so far; sizes add up (one space each)

    def close() -> None:
        if not run:
            return
        span = (clauses[run[0]][0], clauses[run[-1]][1])
        if count(sentence[span[0] : span[1]]) <= cap:
            out.append(span)
        else:  # a tokenizer that does not add up: the clauses one by one
            out.extend(clauses[i] for i in run)
        run.clear()

    for i, size in enumerate(sizes):
        if size > cap:
            close()
        elif run and sum(sizes[j] for j in run) + len(run) + size <= cap:
            run.append(i)
        else:
            close()
            run.append(i)
    close()
    return out


def _trim(text: str, a: int, b: int) -> tuple[int, int] | None:
    """``(a, b)`` without leading and trailing spaces, commas and semicolons; None if
    nothing is left."""
    while a < b and text[a] in " ,;":
        a += 1
    while b > a and text[b - 1] in " ,;":
        b -= 1
    return (a, b) if a < b else None


_CHATTER: Final = _words(
    "hey hi hello wow way go going thanks thank glad great awesome sounds sound nice cool "
    "amazing sorry hear heard long time talk talking chat chatting good luck take care "
    "bye see soon congrats congratulations yep yeah yes oh aww ooh haha lol fun blast job "
    "wonderful fantastic lovely welcome cheers hope doing well love happy excited "
    "exciting totally definitely absolutely agree true right bet same too really much lot "
    "keep guess wish best proud incredible super fab brilliant okay ok sure thing things "
    "stuff day days week weeks catch chatted last since again back life busy crazy wild "
    "tell news update updates share sharing shared let know wanna gonna gotta can't wait"
)


def chatter(words: Iterable[str]) -> bool:
    """Whether every word is a greeting, thanks or praise word, or a capitalized name."""
    return all(w.casefold() in _CHATTER or w[:1].isupper() for w in words)


def topic(values: Iterable[str]) -> str | None:
    """The most mentioned value (case-folded), first seen among ties."""
    counts: dict[str, tuple[int, int, str]] = {}
    for i, v in enumerate(values):
        key = " ".join(v.casefold().split())
        n, first, shown = counts.get(key, (0, i, v))
        counts[key] = (n + 1, first, shown)
    if not counts:
        return None
    return max(counts.values(), key=lambda t: (t[0], -t[1]))[2]


_DECISION_WORDS: Final = _words(
    "approved refunded refund shipped canceled cancelled closed opened booked confirmed "
    "delivered paid agreed decided scheduled resolved replaced issued returned declined "
    "rejected accepted changed fixed signed renewed upgraded ordered completed arrived "
    "escalated reopened rescheduled credited charged"
)
_LOWER_WORD = re.compile(r"[a-z]+")


def decides(text: str) -> bool:
    """Whether ``text`` records a decision (approved, shipped, booked...): a word test
    first (cheap), then the pattern."""
    words = set(_LOWER_WORD.findall(text.lower()))
    return not words.isdisjoint(_DECISION_WORDS) and _DECISION.search(text) is not None


def headline(about: str | None, sentences: Iterable[str]) -> str | None:
    """The segment's first line (module docstring), or None when there is nothing to say."""
    decision = next((s for s in sentences if _DECISION.search(s)), None)
    said = None
    if decision is not None:
        clause = next((c for c in _HEAD_CLAUSE.split(decision) if _DECISION.search(c)), decision)
        said = _AUX.sub("", clause).strip(" .!?;:,")
        said = said[:1].lower() + said[1:] if said[1:2].islower() else said
    if about and said:
        if about.casefold() in said.casefold():
            return HEADLINE + said
        return f"{HEADLINE}{about}: {said}"
    return HEADLINE + said if said else None
