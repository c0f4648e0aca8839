"""The Fact value, its kinds and ranks, and how a set of facts is rendered."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

FactKind: TypeAlias = Literal[
    "self", "preference", "name", "place", "reference", "id", "email", "date", "amount", "number"
]

KINDS: Final[tuple[FactKind, ...]] = (
    "self",
    "preference",
    "name",
    "place",
    "reference",
    "id",
    "email",
    "date",
    "amount",
    "number",
)
"""Fact kinds, in the order they are rendered."""

KIND_VALUE: Final[dict[str, int]] = {
    "self": 8,
    "preference": 6,
    "reference": 5,
    "id": 5,
    "email": 5,
    "name": 4,
    "amount": 4,
    "place": 3,
    "date": 3,
    "number": 2,
}
"""How valuable a kind is when the ledger must drop facts to fit its share: the name a
user gives as theirs ("my name is Dana Okafor", kind ``self``) outranks any other name,
and a place ("moved to Accra", kind ``place``) ranks below names: the ledger never trades
the user's name for a place."""

KIND_LABELS: Final[dict[str, str]] = {"self": "the user's name"}
"""How a kind is labelled when rendered (its own name otherwise)."""


def label(kind: str) -> str:
    """The line label of ``kind``: ``"- the user's name: "``, ``"- name: "``..."""
    return f"- {KIND_LABELS.get(kind, kind)}: "


SOURCE_TIER: Final[dict[str | None, int]] = {
    "user": 2,
    "assistant": 1,
    "system": 1,
    None: 1,
    "tool": 0,
}
"""How much the source of a fact is trusted to matter later: what the user said
outranks what the assistant said, which outranks what a tool returned (tool output can
be fetched again; a user's "I'm allergic to peanuts" cannot)."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact, verbatim from a message.

    ``value`` is the exact text found (``"order 1182"``, ``"I prefer email"``);
    ``source_id`` is the id of the message it was first seen in and ``source_role``
    that message's role (``"tool"`` for a tool result, whatever role carried it;
    ``None``: unknown).
    """

    kind: FactKind
    value: str
    source_id: str | None = None
    source_role: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """The dedup key: kind plus the value case-folded with whitespace collapsed."""
        return (self.kind, " ".join(self.value.split()).casefold())

    @property
    def tier(self) -> int:
        """``SOURCE_TIER`` of the source role (an unknown role counts as 1)."""
        return SOURCE_TIER.get(self.source_role, 1)


_REFUSES = re.compile(r"(?i:\b(?:never|don['’]t|do\s+not|allerg\w*|avoid\w*|please\s+no)\b)")
_DIGIT = re.compile(r"\d")


def value_of(fact: Fact) -> int:
    """``KIND_VALUE`` of the fact's kind; for a preference, two more when it refuses or
    warns ("never call me", "I'm allergic to peanuts"), else one more when it carries a
    number ("my address is now 1550 Larimer St"): losing those costs the most."""
    if fact.kind != "preference":
        return KIND_VALUE[fact.kind]
    if _REFUSES.search(fact.value) is not None:
        return KIND_VALUE["preference"] + 2
    return KIND_VALUE["preference"] + (_DIGIT.search(fact.value) is not None)


FACTS_HEADER: Final = "Key facts (verbatim):"


def render_facts(facts: Iterable[Fact], omitted: int = 0) -> str:
    """The facts block: one line per kind, values in first-seen order; ``""`` if empty,
    and ``""`` when no fact is given (a header that only says facts were omitted tells
    the reader nothing; what was omitted stays retrievable).

    ``omitted`` (facts left out to fit the token share) is stated on a last line, so
    the reader knows the list is not complete.
    """
    by_kind: dict[str, list[str]] = {}
    for f in facts:
        by_kind.setdefault(f.kind, []).append(f.value)
    if not by_kind:
        return ""
    lines = [FACTS_HEADER]
    for kind in KINDS:
        values = by_kind.get(kind)
        if values:
            lines.append(label(kind) + "; ".join(values))
    if omitted:
        lines.append(f"({omitted} more facts omitted)")
    return "\n".join(lines)
