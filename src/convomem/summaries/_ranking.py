"""How the profile's facts rank and render: ``weight``, ``fact_rank``, ``render_ranked``.

Ranking: the user's own statements first, then the assistant's, then tool output;
within a source by ``weight``: name, then how (not) to contact them, allergies and
health, then contact details, diet, home, job, then people and pets, ids and accounts,
dated plans, likes and dislikes, anything else, bare amounts last; the newest first.
``render_ranked`` shows the longest prefix of that ranking that fits its budget and
says how many facts it left out: what it omits ranks below everything it shows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Final

from ._fact import SOURCE_TIER
from ._profile_rules import RELATIONS
from .keyed import KeyedFact

HISTORY_HEADER: Final = "Known facts about the user (current values):"

_WEIGHT: Final = {
    "name": 12, "nickname": 11, "email": 9, "phone": 9, "address": 9, "diet": 9,
    "city": 8, "job": 8, "employer": 8, "age": 7,
}  # fmt: skip
_PREFIX_WEIGHT: Final = {"contact": 10, "allergy": 10, "health": 10, "pref": 5}
_DATE = re.compile(r"^(?:(?:week|weekend) of )?\d{4}-\d{2}(?:-\d{2})?$")


_MONEY = re.compile(r"^\s*(?:[$€£¥]|(?:USD|EUR|GBP)\s?)?-?[\d.,]+\s*(?:[$€£¥%]|USD|EUR|GBP)?\s*$")
_CODE = re.compile(r"^(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{4,}$|^\d{6,}$")
_CODE_WORDS: Final = ("number", "code", " id", "tracking", "confirmation", "reference", "ref")


def weight(attribute: str, value: str = "") -> int:
    """How much a fact matters when the facts must be cut to a budget: the name first,
    then how to contact them and how not to, allergies and health, contact details and
    diet, home and job, people and pets, codes and ids, dated plans, likes and
    dislikes, other facts, and last bare amounts and numbers (a price can be looked up
    again)."""
    kind, sep, _ = attribute.partition(":")
    if sep and kind in _PREFIX_WEIGHT:
        return _PREFIX_WEIGHT[kind]
    if attribute in _WEIGHT:
        return _WEIGHT[attribute]
    if attribute.endswith(" address"):
        return 9
    if kind in RELATIONS:
        return 7
    if _CODE.match(value) or any(w in f" {attribute}" for w in _CODE_WORDS):
        return 6
    if _DATE.match(value):
        return 6
    if _MONEY.match(value):
        return 2
    return 4


def fact_rank(f: KeyedFact) -> tuple[int, int, float, int]:
    """Higher first: source tier (user 2, assistant 1, tool 0), weight, the newer."""
    return (
        SOURCE_TIER.get(f.source_role, 1),
        weight(f.key[1], f.value),
        f.valid_from if f.valid_from is not None else 0.0,
        f.seq or 0,
    )


def render_ranked(
    facts: Iterable[KeyedFact], max_tokens: int | None, count: Callable[[str], int]
) -> str:
    """``facts`` best ranked first, one per line under ``HISTORY_HEADER``: within
    ``max_tokens`` the longest ranked prefix that fits with a last line saying how many
    were left out; ``""`` when there are none or not even the best one fits."""
    ranked = sorted(facts, key=fact_rank, reverse=True)
    if not ranked:
        return ""
    lines = [f"- {f.statement()}" for f in ranked]
    if max_tokens is None:
        return "\n".join([HISTORY_HEADER, *lines])

    def text(k: int) -> str:
        tail = [f"({len(lines) - k} more facts omitted)"] if k < len(lines) else []
        return "\n".join([HISTORY_HEADER, *lines[:k], *tail])

    # An estimate from the lines' own counts (a newline each), then the real count.
    room = max_tokens - count(text(0))
    k = 0
    while k < len(lines) and room - (count(lines[k]) + 1) >= 0:
        room -= count(lines[k]) + 1
        k += 1
    if count(text(len(lines))) <= max_tokens:
        return text(len(lines))
    while k + 1 < len(lines) and count(text(k + 1)) <= max_tokens:
        k += 1
    while k and count(text(k)) > max_tokens:
        k -= 1
    return text(k) if k else ""
