"""Sentences and clauses of what a user writes, for the offline fact rules.

A rule reads a *clause*, so a value never runs into the next statement: "I'm allergic
to peanuts and live in Oslo" is two clauses, "I'm allergic to peanuts" and "I live in
Oslo" (a clause that goes on with a first-person verb after "and" / "but" gets its
subject back). A clause ends at ``;``, at a conjunction or a comma that a new subject
follows ("..., and he's right", "..., she signs off on expenses", "..., which I do every
weekend") and at "and" / "but" before a first-person verb. Lists ("hiking, chess and
jazz") and names ("Smith and Sons") are not split: only a subject or a verb after the
boundary starts a clause.

Every pattern is linear (alternations of fixed words, no nested repeats).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

_SUBJECT: Final = (
    r"(?:i|i['’]m|i['’]ve|i['’]d|i['’]ll|we|we['’]re|we['’]ve|my|our|he|he['’]s|she|she['’]s"
    r"|they|they['’]re|it|it['’]s|that|that['’]s|this|there|there['’]s|which|who|please"
    r"|yo|mi|je|j['’]|mon|ma|ich|mein|meine|wir)"
)
_VERB: Final = (
    r"(?:live|lives|work|works|am|have|has|love|like|hate|enjoy|prefer|moved|own|use|eat"
    r"|drink|ride|need|want|started|joined|left|quit|speak|play|study|go|do|don['’]t"
    r"|can['’]t|never|also|just|recently|now|still|always|usually|had|went|got|made|took|saw"
    r"|met|ate|flew|ran|bought|found|won|spent|[a-z]{3,}ed)"
)
_CONJ: Final = (
    r"(?:and|but|so|because|since|as|while|though|although|which|who|when|whereas|y|pero"
    r"|et|mais|und|aber|weil)"
)
_BOUNDARY: Final = re.compile(
    rf"(?i:\s*;\s*"
    rf"|,?\s+{_CONJ}\s+(?={_SUBJECT}\b)"
    rf"|,\s+(?={_CONJ}\b|{_SUBJECT}\b)"
    rf"|,?\s+(?:and|but)\s+(?={_VERB}\b))"
)
_CARRY: Final = re.compile(r"(?i:(?:and|but)\s+)$")
_STARTS_VERB: Final = re.compile(rf"(?i:{_VERB}\b)")
_SENTENCE: Final = re.compile(
    r"(?<!\b[MD]r\.)(?<!\bMrs\.)(?<!\bM[sx]\.)(?<!\bProf\.)(?<!\bSt\.)(?<!\bJr\.)(?<!\bSr\.)"
    r"(?<=[.!?])\s+(?=[\"'“(]?[A-Z0-9])|(?<=[.!?])\s*\n+|\n+"
)


def sentences(text: str) -> Iterator[str]:
    """Sentences: after ``.``/``!``/``?`` and a space before a capital or a digit, and
    at line breaks ("e.g. this", "$12.50" and "Ms. Okoye" stay whole)."""
    for s in _SENTENCE.split(text):
        s = s.strip()
        if s:
            yield s


def clauses(sentence: str) -> list[str]:
    """The clauses of one sentence, in order (module docstring); a clause that starts
    with a first-person verb after "and" / "but" gets "I" back."""
    out: list[str] = []
    start = 0
    carry = False
    for m in _BOUNDARY.finditer(sentence):
        piece = sentence[start : m.start()].strip(" ,")
        if piece:
            out.append(f"I {piece}" if carry else piece)
        carry = bool(_CARRY.search(m.group())) and bool(_STARTS_VERB.match(sentence, m.end()))
        start = m.end()
    piece = sentence[start:].strip(" ,")
    if piece:
        out.append(f"I {piece}" if carry else piece)
    return out
