"""Key facts: deterministic extraction (no model) and a ledger that carries them verbatim.

Summaries lose details: a summary of a summary drops the order number first. The
facts ledger keeps the details that matter in support-style conversations (names,
reference numbers, ids, dates, emails, amounts, quantities and explicit user
preferences) exactly as they were written, so they survive any number of folds:
facts are extracted from evicted *messages* once and are never re-summarized.

Extraction is regex-based and pragmatic: it prefers a few false positives (a
capitalized product name taken for a name) to missing an order number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from ..errors import ConfigError
from ..tokens import Tokenizer, get_tokenizer

if TYPE_CHECKING:
    from ..model import Message

FactKind: TypeAlias = Literal[
    "preference", "name", "reference", "id", "email", "date", "amount", "number"
]

KINDS: Final[tuple[FactKind, ...]] = (
    "preference",
    "name",
    "reference",
    "id",
    "email",
    "date",
    "amount",
    "number",
)
"""Fact kinds, in the order they are rendered."""

KIND_VALUE: Final[dict[str, int]] = {
    "preference": 6,
    "reference": 5,
    "id": 5,
    "email": 5,
    "name": 4,
    "amount": 4,
    "date": 3,
    "number": 2,
}
"""How valuable a kind is when the ledger must drop facts to fit its share."""


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact, verbatim from a message.

    ``value`` is the exact text found (``"order 1182"``, ``"I prefer email"``);
    ``source_id`` is the id of the message it was first seen in.
    """

    kind: FactKind
    value: str
    source_id: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """The dedup key: kind plus the value case-folded with whitespace collapsed."""
        return (self.kind, " ".join(self.value.split()).casefold())


# -- patterns -----------------------------------------------------------------------

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_WEEKDAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_ORD = r"(?:st|nd|rd|th)?"

_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")

_AMOUNT = re.compile(
    r"(?:(?<![\w$€£¥])(?:US\$|[$€£¥]|(?:USD|EUR|GBP|CHF|CAD|AUD|JPY|INR)\s?)"
    r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s?(?:k|K|million|billion|bn)\b)?)"
    r"|(?:\b(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\s?"
    r"(?:USD|EUR|GBP|CHF|CAD|AUD|JPY|INR|dollars?|euros?|pounds?|cents?|bucks)\b)"
)

_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
    rf"|\b(?:(?:next|last|this|coming)\s+)?(?:{_WEEKDAY},?\s+)?{_MONTH}\.?\s+\d{{1,2}}{_ORD}"
    r"(?:,?\s+\d{4})?\b"
    rf"|\b(?:{_WEEKDAY},?\s+)?\d{{1,2}}{_ORD}\s+(?:of\s+)?{_MONTH}\b\.?(?:,?\s+\d{{4}})?"
    r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    rf"|\b(?:(?:next|last|this|coming)\s+)?{_WEEKDAY}\b"
    r"|\b\d{1,2}(?::\d{2})?\s?(?:[ap]m|[AP]M|[ap]\.m\.)(?!\w)"
    r"|\b(?:[01]?\d|2[0-3]):[0-5]\d\b"
)

_REF_WORDS = (
    r"order|ticket|invoice|case|account|acct|booking|reservation|confirmation|reference|ref"
    r"|tracking|customer|policy|claim|flight|room|seat|item|sku|pnr|transaction|receipt"
    r"|member(?:ship)?|subscription|contract|shipment|parcel|package|serial|license|licence"
    r"|incident|id"
)
_REFERENCE = re.compile(
    rf"\b(?i:{_REF_WORDS})(?:\s+(?i:number|no\.?|num|id|code)(?!\w))?"
    r"(?:\s+(?i:is)\s+|\s*:\s*|\s+|\s*(?=#))#?"
    r"(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9][A-Za-z0-9_-]*\b"
    r"|\b(?i:card\s+ending\s+(?:in\s+)?)\d{4}\b"
)

_ID = re.compile(
    r"(?<![\w#])#[A-Za-z0-9][A-Za-z0-9_-]*"
    r"|\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+\b"
    r"|\b[A-Z]{2,}\d{2,}[A-Z0-9]*\b"
)

_NUMBER = re.compile(
    r"(?<![\w+])(?:\+?\d{1,3}[\s.-]?)?\(?\d{3}\)?[\s.-]?\d{3}[\s.-]?\d{4}(?!\w)"
    r"|\b\d+(?:\.\d+)?\s?(?:%|percent\b|nights?\b|days?\b|weeks?\b|months?\b|years?\b"
    r"|hours?\b|hrs?\b|minutes?\b|mins?\b|people\b|persons?\b|adults?\b|children\b|kids\b"
    r"|guests?\b|items?\b|units?\b|pieces?\b|seats?\b|rooms?\b|bags?\b|kg\b|lbs?\b|km\b"
    r"|miles?\b|cm\b|mm\b|GB\b|MB\b|TB\b)"
)

_TITLE = r"(?:Mr|Mrs|Ms|Mx|Dr|Prof|Sir|Madam|Miss|Mister|Doctor)"
_NAME_WORD = r"(?:[A-Z][a-z]+(?:[A-Z][a-z]+)*(?:['’-][A-Z][a-z]+)*|[A-Z]['’][A-Z][a-z]+)"
_NAME = re.compile(
    rf"(?:\b{_TITLE}\.?\s+)?\b{_NAME_WORD}"
    rf"(?:\s+(?:(?:van|von|de|da|del|der|den|la|le|di|du|bin|al)\s+)?{_NAME_WORD})*\b"
)
_TITLE_PREFIX = re.compile(rf"{_TITLE}\.?\s")

# A clause runs to the end of its sentence; a "." inside a word ("maya.chen@x.com",
# "$12.50") does not end it.
_PREF_CLAUSE = r"(?:[^.!?\n;]|[.!?](?=[^\s.!?]))*"
_PREFERENCE = re.compile(
    r"(?i:\bI(?:\s+|'d\s+|’d\s+)"
    r"(?:really\s+|also\s+|much\s+|strongly\s+|definitely\s+|generally\s+|usually\s+"
    r"|always\s+|would\s+|do\s+not\s+|don't\s+|don’t\s+|can't\s+|cannot\s+|can’t\s+)*"
    r"(?:prefer|like|love|hate|dislike|enjoy|loathe|detest|rather|stand)\b"
    rf"{_PREF_CLAUSE}"
    r"|\bI(?:'m|’m|\s+am)\s+(?:allergic|vegetarian|vegan|lactose|gluten|diabetic|left-handed)"
    rf"{_PREF_CLAUSE}"
    r"|\bplease\s+(?:always|never|don't|don’t|do\s+not|avoid|stop|only)\b"
    rf"{_PREF_CLAUSE}"
    r"|(?<![\w'’])(?:always|never)\s+(?:call|email|e-mail|text|message|contact|send|use|book"
    r"|schedule|ship|ask|phone)\b"
    rf"{_PREF_CLAUSE}"
    r"|\bmy\s+(?:[\w-]+\s+){0,3}?(?:is|are)\s+"
    rf"{_PREF_CLAUSE}"
    r"|\b(?:call\s+me|I\s+go\s+by)\s+"
    rf"{_PREF_CLAUSE})"
)
_PREF_MAX_CHARS: Final = 160

# Capitalized words that are not names (sentence starters, greetings, calendar words).
_NOT_NAMES_TEXT = """
    I Im I'm I’m I'll I've I'd The A An This That These Those My Your Our Their His Her Its
    We You He She They It Hi Hello Hey Dear Thanks Thank Please Yes Yeah No Nope Ok Okay Sure
    Great Good Fine Well So And But Or If When What Why How Where Who Whom Whose Which Also
    Just Sorry Sounds Let Lets Let's Can Could Would Should Will Shall May Might Must Do Does
    Did Done Is Are Was Were Be Been Have Has Had Not Any All Some Many Much Most More There
    Here Then Now Today Tomorrow Tonight Yesterday Unfortunately Actually Maybe Perhaps Of In
    On At For To From By With As After Before Once Since Until While Because Although Though
    Note Got One Two Three First Second Next Last Another Every Each Both Either Neither None
    Nothing Something Anything Everything Someone Anyone Everyone Nobody Welcome Cheers Bye
    Goodbye Regards Best Kind Sincerely Hmm Oh Ah Wow Alright Absolutely Certainly Definitely
    Indeed Exactly Right Perfect Awesome Nice Cool Correct Understood Noted Got Happy Glad
    Also However Therefore Meanwhile Otherwise Additionally Finally Again Still Yet Even Only
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May
    June July August September October November December Jan Feb Mar Apr Jun Jul Aug Sep Sept
    Oct Nov Dec Summary Key User Assistant System Tool Mr Mrs Ms Dr Prof
"""
_NOT_NAMES: Final = frozenset(_NOT_NAMES_TEXT.split())

_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*\s+|\n+")
_ABBREVIATIONS_TEXT = "mr mrs ms mx dr prof sr jr st vs etc inc ltd co no e.g i.e approx dept fig"
_ABBREVIATIONS: Final = frozenset(_ABBREVIATIONS_TEXT.split())


def split_sentences(text: str) -> list[tuple[int, str]]:
    """Split text into ``(start offset, sentence)`` pairs (abbreviation-aware, pragmatic)."""
    out: list[tuple[int, str]] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if m.group().strip() and not m.group().startswith("\n"):
            # "Dr. Smith", "e.g. this": a period after an abbreviation is not an end.
            word = text[max(start, text.rfind(" ", start, m.start()) + 1) : m.start()]
            if m.group()[0] == "." and word.lower().rstrip(".") in _ABBREVIATIONS:
                continue
        end = m.end()
        piece = text[start:end]
        stripped = piece.strip()
        if stripped:
            out.append((start + len(piece) - len(piece.lstrip()), stripped))
        start = end
    piece = text[start:]
    if piece.strip():
        out.append((start + len(piece) - len(piece.lstrip()), piece.strip()))
    return out


def _overlaps(spans: list[tuple[int, int]], a: int, b: int) -> bool:
    return any(a < e and s < b for s, e in spans)


def _clip(value: str, limit: int) -> str:
    value = " ".join(value.split()).rstrip(" ,:-")
    if len(value) <= limit:
        return value
    cut = value.rfind(" ", 0, limit)
    return value[: cut if cut > 0 else limit]


def extract_facts(
    text: str, *, source_id: str | None = None, preferences: bool = True
) -> list[Fact]:
    """The facts in ``text``, in order of appearance, each once.

    Atomic kinds are matched in priority order (email, amount, date, reference, id,
    number, name) and a span claimed by one kind is not reused by a later one, so
    ``"March 3"`` is a date and not the name ``March``. ``preferences=False`` skips
    preference clauses (they are only taken from user messages).
    """
    found: list[tuple[int, Fact]] = []
    taken: list[tuple[int, int]] = []
    seen: set[tuple[str, str]] = set()

    def add(pos: int, kind: FactKind, value: str) -> None:
        fact = Fact(kind, value, source_id)
        if value and fact.key not in seen:
            seen.add(fact.key)
            found.append((pos, fact))

    kinds: tuple[tuple[FactKind, re.Pattern[str]], ...] = (
        ("email", _EMAIL),
        ("amount", _AMOUNT),
        ("date", _DATE),
        ("reference", _REFERENCE),
        ("id", _ID),
        ("number", _NUMBER),
    )
    for kind, pattern in kinds:
        for m in pattern.finditer(text):
            a, b = m.span()
            if not _overlaps(taken, a, b):
                taken.append((a, b))
                add(a, kind, m.group().strip())
    for offset, sentence in split_sentences(text):
        for m in _NAME.finditer(sentence):
            a, b = m.start() + offset, m.end() + offset
            if _overlaps(taken, a, b):
                continue
            name = _name_from_run(m.group(), at_start=m.start() == 0)
            if name:
                add(a + m.group().find(name), "name", name)
    if preferences:
        for m in _PREFERENCE.finditer(text):
            add(m.start(), "preference", _clip(m.group(), _PREF_MAX_CHARS))
    found.sort(key=lambda pf: pf[0])
    return [f for _, f in found]


def _name_from_run(run: str, *, at_start: bool) -> str:
    """Trim a run of capitalized words to the name it holds, or ``""``."""
    if _TITLE_PREFIX.match(run):
        return run  # "Dr. Smith" is a name wherever it stands
    words = run.split()
    lead = 0
    while lead < len(words) and words[lead] in _NOT_NAMES:
        lead += 1
    words = words[lead:]
    while words and words[-1] in _NOT_NAMES:
        words.pop()
    if not words:
        return ""
    if at_start and lead == 0 and len(words) == 1:
        return ""  # a lone capitalized word opening a sentence is usually not a name
    return " ".join(words)


def extract_from_messages(messages: Iterable[Message]) -> list[Fact]:
    """Facts from each message's text (preferences only from user messages), in order."""
    out: list[Fact] = []
    for m in messages:
        text = m.text()
        if text:
            out.extend(extract_facts(text, source_id=m.id, preferences=m.role == "user"))
    return out


# -- rendering ----------------------------------------------------------------------

FACTS_HEADER: Final = "Key facts (verbatim):"


def render_facts(facts: Iterable[Fact], omitted: int = 0) -> str:
    """The facts block: one line per kind, values in first-seen order; ``""`` if empty.

    ``omitted`` (facts left out to fit the token share) is stated on a last line, so
    the reader knows the list is not complete.
    """
    by_kind: dict[str, list[str]] = {}
    for f in facts:
        by_kind.setdefault(f.kind, []).append(f.value)
    if not by_kind and not omitted:
        return ""
    lines = [FACTS_HEADER]
    for kind in KINDS:
        values = by_kind.get(kind)
        if values:
            lines.append(f"- {kind}: " + "; ".join(values))
    if omitted:
        lines.append(f"({omitted} more facts omitted)")
    return "\n".join(lines)


@dataclass(slots=True)
class _Entry:
    fact: Fact
    seq: int
    mentions: int


class FactLedger:
    """Facts accumulated from evicted messages, deduplicated, in first-seen order.

    A fact keeps the id of the message it was first seen in; seeing it again only
    counts a mention. ``render(max_tokens)`` writes the facts verbatim within a token
    share. Drop policy, when they do not fit: facts are ranked by kind value
    (``KIND_VALUE``: preferences, references, ids and emails first, bare quantities
    last) plus up to 2 for repeated mentions; the lowest ranked go first and, among
    equals, the oldest. The rendering says how many were omitted. Omitted facts stay
    in the ledger (``facts``); only ``max_facts`` bounds storage, dropping the oldest
    fact of the least valuable kind (counted in ``dropped``).
    """

    def __init__(
        self,
        *,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
        max_facts: int = 10_000,
    ) -> None:
        if isinstance(max_facts, bool) or not isinstance(max_facts, int) or max_facts < 1:
            raise ConfigError(f"max_facts={max_facts!r}: must be a positive integer")
        self._tok = get_tokenizer(tokenizer)
        self.max_facts = max_facts
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._seq = 0
        self.dropped = 0
        self._memo: dict[int | None, tuple[tuple[Fact, ...], int]] = {}

    def copy(self) -> FactLedger:
        """An independent copy (used to stage a fold without touching this ledger)."""
        other = FactLedger.__new__(FactLedger)
        other._tok = self._tok
        other.max_facts = self.max_facts
        other._entries = {k: _Entry(e.fact, e.seq, e.mentions) for k, e in self._entries.items()}
        other._seq = self._seq
        other.dropped = self.dropped
        other._memo = dict(self._memo)
        return other

    def add(self, facts: Iterable[Fact]) -> list[Fact]:
        """Record facts; returns those that were new."""
        new: list[Fact] = []
        for fact in facts:
            if not isinstance(fact, Fact):
                raise ConfigError(f"fact={fact!r}: must be a Fact")
            entry = self._entries.get(fact.key)
            if entry is not None:
                entry.mentions += 1
            else:
                self._seq += 1
                self._entries[fact.key] = _Entry(fact, self._seq, 1)
                new.append(fact)
                if len(self._entries) > self.max_facts:
                    self._drop_one()
        self._memo.clear()
        return new

    def add_messages(self, messages: Iterable[Message]) -> list[Fact]:
        """Extract facts from messages and record them; returns the new ones."""
        return self.add(extract_from_messages(messages))

    def _drop_one(self) -> None:
        victim = min(self._entries.values(), key=lambda e: (KIND_VALUE[e.fact.kind], e.seq))
        del self._entries[victim.fact.key]
        self.dropped += 1

    def clear(self) -> None:
        """Forget every fact."""
        self._entries.clear()
        self._memo.clear()
        self.dropped = 0

    @property
    def facts(self) -> tuple[Fact, ...]:
        """Every stored fact, in first-seen order."""
        return tuple(e.fact for e in self._entries.values())

    def mentions(self, fact: Fact) -> int:
        """How many times a fact was seen (0 if unknown)."""
        entry = self._entries.get(fact.key)
        return 0 if entry is None else entry.mentions

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Fact]:
        return iter(self.facts)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Fact):
            return item.key in self._entries
        if isinstance(item, str):
            needle = " ".join(item.split()).casefold()
            return any(k[1] == needle for k in self._entries)
        return False

    def select(self, max_tokens: int | None = None) -> tuple[tuple[Fact, ...], int]:
        """The facts that fit ``max_tokens`` once rendered (first-seen order) and how many
        were left out. ``None`` means no limit."""
        hit = self._memo.get(max_tokens)
        if hit is not None:
            return hit
        entries = list(self._entries.values())
        if max_tokens is None or not entries:
            result: tuple[tuple[Fact, ...], int] = (tuple(e.fact for e in entries), 0)
        else:
            result = self._select(entries, max_tokens)
        self._memo[max_tokens] = result
        return result

    def _select(self, entries: list[_Entry], max_tokens: int) -> tuple[tuple[Fact, ...], int]:
        count = self._tok.count
        everything = tuple(e.fact for e in entries)
        if count(render_facts(everything)) <= max_tokens:
            return everything, 0
        ranked = sorted(
            entries,
            key=lambda e: (KIND_VALUE[e.fact.kind] + min(e.mentions - 1, 2), e.seq),
            reverse=True,
        )
        # Greedy by rank on estimated costs, then verify the real rendering and trim.
        used = count(render_facts((), omitted=len(entries)))
        kinds: set[str] = set()
        chosen: list[_Entry] = []
        for e in ranked:
            kind = e.fact.kind
            cost = count(e.fact.value) + 1 + (0 if kind in kinds else count(f"- {kind}: ") + 1)
            if used + cost <= max_tokens:
                chosen.append(e)
                kinds.add(kind)
                used += cost
        while True:
            keep = sorted(chosen, key=lambda e: e.seq)
            facts = tuple(e.fact for e in keep)
            omitted = len(entries) - len(facts)
            if not chosen or count(render_facts(facts, omitted)) <= max_tokens:
                break
            chosen.pop()  # the lowest ranked chosen so far
        if count(render_facts(facts, omitted)) > max_tokens:
            return (), 0  # not even the "omitted" note fits: render nothing
        return facts, omitted

    def render(self, max_tokens: int | None = None) -> str:
        """The facts block verbatim within ``max_tokens`` (``""`` when empty)."""
        facts, omitted = self.select(max_tokens)
        return render_facts(facts, omitted)
