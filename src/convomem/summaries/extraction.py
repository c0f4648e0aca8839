"""Deterministic fact extraction (no model), linear in the text and done once per text.

The facts ledger keeps the details that matter in support-style conversations (names,
reference numbers, ids, dates, emails, amounts, quantities and explicit user
preferences) exactly as written. Extraction is regex-based and pragmatic: it prefers a
few false positives (a capitalized product name taken for a name) to missing an order
number.

Cost. Every pattern is written so that a match can only start at the beginning of a
run (of digits, word characters, punctuation), which keeps each pass linear even on
hostile text (a 50 MB paste, a million dots); spans already claimed are looked up by
bisection. A text longer than ``MAX_SCAN_CHARS`` is scanned in a window: its head and
its tail (``scan_window``), so the work per message is bounded; a pasted log of 50 MB
would yield far more facts than any ledger keeps anyway.

Once per text. Results are memoized by the exact text scanned (a pure function of it,
so the memo cannot hand one conversation's facts to another): the running summary, its
extractive summarizer and a compression of the same message share one scan.
``fact_cache_info()`` reports the work.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias

from ._fact import Fact, FactKind
from ._patterns import (
    ABBREVIATIONS,
    AMOUNT,
    DATE,
    EMAIL,
    ID,
    NAME,
    NAME_INTRO,
    NOT_NAMES,
    NUMBER,
    PLACE_BEFORE,
    PREF_MAX_CHARS,
    PREFERENCE,
    REFERENCE,
    SENTENCE_END,
    STREET_END,
    TITLE_PREFIX,
)

if TYPE_CHECKING:
    from ..model import Message

MAX_SCAN_CHARS: Final = 32_768
"""Characters of one text scanned for facts: longer texts are scanned in a window of
their first three quarters of this and their last quarter."""

MAX_VALUE_CHARS: Final = 80
"""An atomic fact longer than this (a 10,000-character "id") is noise, not a fact."""

_Span: TypeAlias = tuple[int, FactKind, str]


class Scan(NamedTuple):
    """One scanned text: its fact spans ``(position, kind, value)`` and its sentences
    ``(start, sentence)``, both in order of position."""

    spans: tuple[_Span, ...]
    sentences: tuple[tuple[int, str], ...]


def scan_window(text: str, max_chars: int | None = MAX_SCAN_CHARS) -> str:
    """``text`` itself, or its head and tail joined by a line break when it is longer than
    ``max_chars`` (cut at whitespace near the limits, so no word is split)."""
    if max_chars is None or len(text) <= max_chars:
        return text
    head_n = max_chars * 3 // 4
    tail_start = len(text) - (max_chars - head_n)
    cut = text.rfind(" ", max(0, head_n - 256), head_n)
    head = text[: cut if cut > 0 else head_n]
    start = text.find(" ", tail_start, tail_start + 256)
    tail = text[start + 1 if start >= 0 else tail_start :]
    return f"{head}\n…\n{tail}"


def split_sentences(text: str) -> list[tuple[int, str]]:
    """Split text into ``(start offset, sentence)`` pairs (abbreviation-aware, pragmatic)."""
    out: list[tuple[int, str]] = []
    start = 0
    for m in SENTENCE_END.finditer(text):
        end_mark = m.group()
        if end_mark[0] != "\n":
            # "Dr. Smith", "e.g. this": a period after an abbreviation is not an end.
            word = text[max(start, text.rfind(" ", start, m.start()) + 1) : m.start()]
            if end_mark[0] == "." and word.lower().rstrip(".") in ABBREVIATIONS:
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


class _Claimed:
    """Non-overlapping spans claimed so far, sorted: overlap checks by bisection."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def overlaps(self, a: int, b: int) -> bool:
        i = bisect_right(self.starts, a)
        if i and self.ends[i - 1] > a:
            return True
        return i < len(self.starts) and self.starts[i] < b

    def merge(self, spans: list[tuple[int, int]]) -> None:
        if spans:
            pairs = sorted([*zip(self.starts, self.ends, strict=True), *spans])
            self.starts = [a for a, _ in pairs]
            self.ends = [b for _, b in pairs]


def _clip(value: str, limit: int) -> str:
    value = " ".join(value[: limit * 2].split()).rstrip(" ,:-")
    if len(value) <= limit:
        return value
    cut = value.rfind(" ", 0, limit)
    return value[: cut if cut > 0 else limit]


_DIGIT = re.compile(r"\d")
_REFUSED = re.compile(r"(?:n['’]t|not|never)\s+$")  # "don't call me Bob": not their name
_DIGIT_OR_HASH = re.compile(r"[\d#]")
_AT = re.compile("@")
# Substrings without one of which AMOUNT (case-sensitive) cannot match: a currency sign,
# code or word. Prices in tool output ("361.25") usually have none.
_CURRENCY: Final = ("$", "€", "£", "¥", "USD", "EUR", "GBP", "CHF", "CAD", "AUD", "JPY")
_CURRENCY_WORDS: Final = ("INR", "dollar", "euro", "pound", "cent", "buck")


def _has_currency(text: str) -> bool:
    return any(c in text for c in _CURRENCY) or any(w in text for w in _CURRENCY_WORDS)


def _has_date(text: str) -> bool:
    """Every DATE alternative holds a digit but the weekday ones ("...day")."""
    return "day" in text or _DIGIT.search(text) is not None


_Needs: TypeAlias = "re.Pattern[str] | Callable[[str], bool] | None"
# Each kind, its pattern, and a quick test without which it cannot match at all (most
# chat messages have no "@" and many no digit: their passes are skipped).
_ATOMIC: Final[tuple[tuple[FactKind, re.Pattern[str], _Needs], ...]] = (
    ("email", EMAIL, _AT),
    ("amount", AMOUNT, _has_currency),
    ("date", DATE, _has_date),
    ("reference", REFERENCE, _DIGIT),
    ("id", ID, _DIGIT_OR_HASH),
    ("number", NUMBER, _DIGIT),
)


def _may_match(needs: _Needs, text: str) -> bool:
    if needs is None:
        return True
    if isinstance(needs, re.Pattern):
        return needs.search(text) is not None
    return needs(text)


def _scan(text: str, preferences: bool) -> Scan:
    """The facts of ``text`` as ``(position, kind, value)``, in order, each key once,
    and its sentences (names are looked for sentence by sentence)."""
    found: list[_Span] = []
    seen: set[tuple[str, str]] = set()
    claimed = _Claimed()

    def add(pos: int, kind: FactKind, value: str) -> None:
        key = (kind, " ".join(value.split()).casefold())
        if value and key not in seen:
            seen.add(key)
            found.append((pos, kind, value))

    for kind, pattern, needs in _ATOMIC:
        if not _may_match(needs, text):
            continue
        taken: list[tuple[int, int]] = []
        for m in pattern.finditer(text):
            a, b = m.span()
            if not claimed.overlaps(a, b):
                taken.append((a, b))
                value = m.group().strip()
                if len(value) <= MAX_VALUE_CHARS:
                    add(a, kind, value)
        claimed.merge(taken)
    sentences = tuple(split_sentences(text))
    lowered = text.lower()
    own: set[str] = set()
    if "name" in lowered or " me " in lowered or " by " in lowered or "called" in lowered:
        for m in NAME_INTRO.finditer(text):
            group = "v" if m.group("v") else "c"
            a, b = m.span(group)
            refused = _REFUSED.search(lowered[max(0, m.start() - 8) : m.start()])
            if claimed.overlaps(a, b) or refused:
                continue
            value = m.group(group)
            own.add(value.casefold())
            # Said by the user, the name is theirs: it outranks every other name.
            add(a, "self" if preferences else "name", value)
    for offset, sentence in sentences:
        last_place = -1
        for m in NAME.finditer(sentence):
            a, b = m.start() + offset, m.end() + offset
            if claimed.overlaps(a, b) or b - a > MAX_VALUE_CHARS:
                continue
            name = _name_from_run(m.group(), at_start=m.start() == 0)
            if not name or name.casefold() in own:
                continue
            at = a + m.group().find(name)
            before = sentence[max(0, at - offset - 40) : at - offset]
            place = bool(PLACE_BEFORE.search(before) or STREET_END.search(name))
            gap = sentence[max(0, last_place) : at - offset] if last_place >= 0 else ""
            place = place or gap in (", ", " to ", " and ", " or ")
            if place:
                last_place = at - offset + len(name)  # "Larimer St, Denver": both places
            add(at, "place" if place else "name", name)
    if preferences:
        for m in PREFERENCE.finditer(text):
            add(m.start(), "preference", _clip(m.group(), PREF_MAX_CHARS))
    found.sort(key=lambda span: span[0])
    return Scan(tuple(found), sentences)


def _name_from_run(run: str, *, at_start: bool) -> str:
    """Trim a run of capitalized words to the name it holds, or ``""``."""
    if TITLE_PREFIX.match(run):
        return run  # "Dr. Smith" is a name wherever it stands
    words = [re.sub(r"['’]s$", "", w) for w in run.split()]  # "Sara's birthday": Sara
    lead = 0
    while lead < len(words) and words[lead] in NOT_NAMES:
        lead += 1
    words = words[lead:]
    while words and words[-1] in NOT_NAMES:
        words.pop()
    if not words:
        return ""
    if at_start and lead == 0 and len(words) == 1:
        return ""  # a lone capitalized word opening a sentence is usually not a name
    return " ".join(words)


# -- the memo ------------------------------------------------------------------------


class FactCacheInfo(NamedTuple):
    """The work of the extraction memo since the process started (or the last clear)."""

    hits: int
    misses: int
    """Texts actually scanned."""
    entries: int
    chars: int


class _Memo:
    """Scans by exact text, least recently used first out, bounded in entries and chars."""

    def __init__(self, entries: int = 4096, chars: int = 16_000_000) -> None:
        self.max_entries = entries
        self.max_chars = chars
        self.data: OrderedDict[tuple[str, bool], Scan] = OrderedDict()
        self.chars = 0
        self.hits = 0
        self.misses = 0
        self.lock = threading.Lock()

    def get(self, text: str, preferences: bool) -> tuple[Scan, bool]:
        """The scan of ``text`` and whether it had to be made (a miss)."""
        key = (text, preferences)
        with self.lock:
            scan = self.data.get(key)
            if scan is not None:
                self.data.move_to_end(key)
                self.hits += 1
                return scan, False
        scan = _scan(text, preferences)  # outside the lock: other threads go on
        with self.lock:
            self.misses += 1
            if key not in self.data:
                self.data[key] = scan
                self.chars += len(text)
                while len(self.data) > self.max_entries or self.chars > self.max_chars:
                    (old, _), _ = self.data.popitem(last=False)
                    self.chars -= len(old)
        return scan, True

    def clear(self) -> None:
        with self.lock:
            self.data.clear()
            self.chars = self.hits = self.misses = 0


_MEMO: Final = _Memo()


def fact_cache_info() -> FactCacheInfo:
    """Hits, misses (texts scanned), entries and characters held by the extraction memo."""
    with _MEMO.lock:
        return FactCacheInfo(_MEMO.hits, _MEMO.misses, len(_MEMO.data), _MEMO.chars)


def clear_fact_cache() -> None:
    """Empty the extraction memo and reset its counters."""
    _MEMO.clear()


def _facts(spans: tuple[_Span, ...], source_id: str | None, source_role: str | None) -> list[Fact]:
    return [Fact(kind, value, source_id, source_role) for _, kind, value in spans]


def extract_facts(
    text: str,
    *,
    source_id: str | None = None,
    preferences: bool = True,
    source_role: str | None = None,
    max_chars: int | None = MAX_SCAN_CHARS,
) -> list[Fact]:
    """The facts in ``text``, in order of appearance, each once.

    Atomic kinds are matched in priority order (email, amount, date, reference, id,
    number, name) and a span claimed by one kind is not reused by a later one, so
    ``"March 3"`` is a date and not the name ``March``. ``preferences=False`` skips
    preference clauses (they are only taken from what a user wrote). A text longer than
    ``max_chars`` is scanned in its ``scan_window`` (``None``: all of it, still linear).
    """
    scan, _ = _MEMO.get(scan_window(text, max_chars), preferences)
    return _facts(scan.spans, source_id, source_role)


def source_role(message: Message) -> str:
    """The role a message's facts are attributed to: ``"tool"`` for any tool result
    (an Anthropic tool result travels in a user message), else its role."""
    return "tool" if message.has_tool_result() else message.role


def takes_preferences(message: Message) -> bool:
    """Preferences are only taken from what a user wrote (not from a tool result)."""
    return message.role == "user" and not message.has_tool_result()


def extract_message(
    message: Message, max_chars: int | None = MAX_SCAN_CHARS
) -> tuple[list[Fact], bool]:
    """The facts of one message's text and whether its text had to be scanned."""
    text = message.text()
    if not text:
        return [], False
    scan, missed = _MEMO.get(scan_window(text, max_chars), takes_preferences(message))
    return _facts(scan.spans, message.id, source_role(message)), missed


def extract_from_messages(
    messages: Iterable[Message], *, max_chars: int | None = MAX_SCAN_CHARS
) -> list[Fact]:
    """Facts from each message's text (preferences only from user messages), in order."""
    out: list[Fact] = []
    for m in messages:
        out.extend(extract_message(m, max_chars)[0])
    return out


def scan_text(text: str, preferences: bool) -> Scan:
    """For summarizers: the scan of ``text``'s ``scan_window`` (offsets into the window),
    shared through the memo with the ledger's extraction."""
    return _MEMO.get(scan_window(text), preferences)[0]
