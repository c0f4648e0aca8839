"""Built-in summarizers that need no model: extractive and truncating."""

from __future__ import annotations

import functools
import heapq
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias, TypeVar

from .. import _check
from ..errors import ConfigError
from ..model import Message, ToolUseBlock
from ..tokens import Tokenizer, get_tokenizer
from ._extractive_parts import HEADLINE, chatter, decides, display, headline, pieces, topic
from ._fact import KIND_VALUE
from .extraction import scan_text, split_sentences, takes_preferences
from .summary import (
    SEGMENT_KEY,
    TRUNCATION_MARKER,
    Summary,
    message_label,
    transcript,
)

# -- built-in summarizers ------------------------------------------------------------

_LABELED = re.compile(r"^((?:system|user|assistant|tool)(?:\([^)]*\))?): (.*)$")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’_-]*")
_STOPWORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves ok okay yes yeah thanks thank please hi hello hey sure also
    got get let lets i'm it's that's don't can't im dont cant one would like just really
"""
_STOPWORDS: Final = frozenset(_STOPWORDS_TEXT.split())
_DIGIT: Final = re.compile(r"\d")
T = TypeVar("T")
K = TypeVar("K")


_Unit: TypeAlias = tuple[str | None, bool, list[str], bool]
"""``(label, may hold preferences, [text, extras...], a line of a summary)``."""
_Terms: TypeAlias = tuple[tuple[str, float], ...]
_Made: TypeAlias = tuple[str, int, _Terms]
"""A summary sentence as a candidate: its text (clipped), cost and terms."""
_Item: TypeAlias = tuple[int, str, list[tuple[str, str]], _Made | None, tuple[str, bool] | None]
_MEMO_ENTRIES: Final = 16_384
MIN_COST: Final = 8
"""A sentence's cost never counts below this when it is scored: "Wow, Maria!" costs four
tokens but says nothing, and gain per token would otherwise favour it."""
TOOL_WEIGHT: Final = 0.5
"""What a tool result's sentence gains counts for, against a user's or an assistant's:
tool output can be fetched again, and a page of prices would otherwise fill the summary."""
HEADLINE_MIN_BUDGET: Final = 64
"""A segment gets its "Covers:" line only when its budget is at least this."""
_TOPIC_KINDS: Final = ("reference",)


def _remember(memo: dict[K, T], key: K, value: T) -> None:
    """Store in a bounded memo (the oldest entry goes first)."""
    if len(memo) >= _MEMO_ENTRIES:
        memo.pop(next(iter(memo)), None)
    memo[key] = value


@dataclass(slots=True)
class _Candidate:
    unit: int
    pos: int
    text: str
    terms: dict[str, float]
    cost: int
    source: tuple[int, int, int, str] | None = None
    """``(sentence number, start, end, sentence)`` of a clause of a longer sentence."""


class ExtractiveSummarizer:
    """Offline, deterministic summarizer: the most informative sentences under a budget.

    Sentences are scored by the TF-IDF weight of the terms they add that no chosen
    sentence covers yet (numbers, proper nouns and extracted facts weigh more),
    divided by their token cost (at least ``MIN_COST``), and picked greedily until
    ``max_tokens``; they are kept in their original order, attributed (``user: ...``).
    The previous summary's sentences compete with the new ones, so the result folds
    both together.

    What it keeps is whole: a sentence, or for a sentence longer than half the budget
    one of its clauses, followed by " …" when the rest of its sentence is left out; a
    value is in the summary entirely or not at all. (A long run with no clause and no
    value at all is shown by its first words and " …".) A tool result that is JSON is
    read as its fields, and what a tool said gains ``TOOL_WEIGHT`` of what a person said
    (it can be fetched again). A sentence said twice is kept once, and a short one that
    states nothing ("Thanks, Ada!") is not kept. With a budget of at least
    ``HEADLINE_MIN_BUDGET``, over several messages one of which records a decision, the
    result starts with a line saying what it covers (``_extractive_parts.headline``).
    """

    name = "extractive"

    def __init__(
        self,
        max_tokens: int = 256,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
    ) -> None:
        self.max_tokens = _check.integer("max_tokens", max_tokens, minimum=8)
        self._tok = get_tokenizer(tokenizer)
        # Bounded memos by sentence text: its token count, and a summary sentence as a
        # candidate (a merge re-reads old sentences). Both are pure functions of the text.
        self._counts: dict[str, int] = {}
        self._made: dict[tuple[str, bool], _Made] = {}

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_tokens={self.max_tokens})"

    def _units(self, messages: Sequence[Message], previous: Summary | None) -> list[_Unit]:
        """The units (``_Unit``), previous first.

        A message's text comes first and alone, so its fact scan is the one the running
        summary's ledger already made (the extraction memo is keyed by the text); tool
        calls follow as extra parts.
        """
        units: list[_Unit] = []

        def summary_lines(text: str) -> None:
            for line in text.splitlines():
                line = line.strip()
                if not line or line.startswith(HEADLINE):
                    continue  # a merge writes a new headline
                m = _LABELED.match(line)
                if m:
                    units.append((m.group(1), m.group(1).startswith("user"), [m.group(2)], True))
                else:
                    units.append((None, True, [line], True))

        if previous is not None and previous.text:
            summary_lines(previous.text)
        for msg in messages:
            if msg.metadata.get(SEGMENT_KEY):
                summary_lines(msg.text())
                continue
            tool = msg.role == "tool" or msg.has_tool_result()
            parts = [display(msg.text(), tool), *_calls(msg)]
            if any(p.strip() for p in parts):
                units.append((message_label(msg), takes_preferences(msg), parts, False))
        return units

    def _candidates(self, units: list[_Unit]) -> list[_Candidate]:
        cap = max(8, self.max_tokens // 2)
        # Sentences in order: ``(unit, sentence, its facts, memo hit, memo key)``. A
        # message part is scanned whole (the ledger's scan, shared through the memo); a
        # summary line sentence by sentence, each a pure function of its text memoized
        # here, so a merge that re-reads old sentences neither scans nor counts them.
        items: list[_Item] = []
        made = self._made
        for u, (_label, prefs, parts, summary_line) in enumerate(units):
            for part in parts:
                if not summary_line:
                    _scan_into(items, u, part, prefs, None)
                    continue
                for _, raw in split_sentences(part):
                    key = (" ".join(raw.split()), prefs)
                    hit = made.get(key)
                    if hit is None:
                        _scan_into(items, u, key[0], prefs, key)
                    else:
                        items.append((u, hit[0], [], hit, None))
        count = self._counter([s for _, s, _, hit, _ in items if hit is None])
        cands: list[_Candidate] = []
        seen: set[str] = set()
        for n, (u, sentence, here, hit, memo_key) in enumerate(items):
            if hit is not None:
                if hit[0] and hit[0].casefold() not in seen:
                    seen.add(hit[0].casefold())
                    cands.append(_Candidate(u, len(cands), hit[0], dict(hit[2]), hit[1]))
                continue
            spans = pieces(sentence, cap - 1, count)
            if not spans and not here:
                spans = _head(sentence, cap - 3, count)  # no value to cut: its start, "…"
            whole = spans == [(0, len(sentence))]
            for a, b in spans:
                part = sentence[a:b]
                facts = [(k, v) for k, v in here if v in part]
                if part.casefold() in seen or _says_nothing(part, facts):
                    continue
                seen.add(part.casefold())
                terms = _terms(part)
                for kind, value in facts:
                    key_ = " ".join(value.split()).casefold()
                    terms[f"\x00{kind}\x1f{key_}"] = 1.0 + KIND_VALUE[kind] / 2
                cost = count(part) + 1
                if memo_key is not None and whole:
                    _remember(made, memo_key, (part, cost, tuple(terms.items())))
                source = None if whole else (n, a, b, sentence)
                cands.append(_Candidate(u, len(cands), part, terms, cost, source))
            if not spans and memo_key is not None:
                _remember(made, memo_key, ("", 0, ()))
        return cands

    def _counter(self, sentences: list[str]) -> Callable[[str], int]:
        """``count``, with the distinct ``sentences`` counted up front in one batch and
        memoized (an old sentence is not counted again)."""
        memo = self._counts
        todo = list(dict.fromkeys(s for s in sentences if s not in memo))
        if todo:
            batch = getattr(self._tok, "count_texts", None)
            counts = batch(todo) if batch is not None else [self._tok.count(t) for t in todo]
            for text, n in zip(todo, counts, strict=True):
                _remember(memo, text, n)
        raw = self._tok.count

        def count(text: str) -> int:
            n = memo.get(text)
            return raw(text) if n is None else n

        return count

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        units = self._units(messages, previous)
        cands = self._candidates(units)
        if not cands:
            return ""
        df: dict[str, int] = {}
        for c in cands:
            for t in c.terms:
                df[t] = df.get(t, 0) + 1
        n = len(cands)
        weight = {t: math.log(1 + n / d) for t, d in df.items()}
        about = topic(
            _as_written(c.text, t.split("\x1f", 1)[1])
            for c in cands
            for t in c.terms
            if t.startswith("\x00") and t[1:].split("\x1f", 1)[0] in _TOPIC_KINDS
        )
        head = f"{HEADLINE}{about or ''}: "
        labels = [f"{label}: " for label, _, _, _ in units if label]
        count = self._counter([*labels, head])
        label_cost = [count(f"{label}: ") if label else 0 for label, _, _, _ in units]
        several = len({c.unit for c in cands if not units[c.unit][3]}) > 1
        wants = several and self.max_tokens >= HEADLINE_MIN_BUDGET
        wants = wants and any(decides(c.text) for c in cands)
        reserve = count(head) + 12 if wants else 0
        chosen = self._select(units, cands, weight, label_cost, self.max_tokens - reserve)
        return self._render(units, cands, chosen, count, about, wants)

    def _select(
        self,
        units: list[_Unit],
        cands: list[_Candidate],
        weight: dict[str, float],
        label_cost: list[int],
        budget: int,
    ) -> list[int]:
        covered: set[str] = set()
        used_units: set[int] = set()
        tiers = [TOOL_WEIGHT if (u[0] or "").startswith("tool") else 1.0 for u in units]
        weighted = [[(t, weight[t] * b) for t, b in c.terms.items()] for c in cands]

        def score(c: _Candidate) -> tuple[float, int]:
            gain = sum(w for t, w in weighted[c.pos] if t not in covered) * tiers[c.unit]
            cost = c.cost + (0 if c.unit in used_units else label_cost[c.unit])
            return gain / max(cost, MIN_COST), cost

        heap = [(-score(c)[0], c.pos) for c in cands]
        heapq.heapify(heap)
        used = 0
        chosen: list[int] = []
        while heap:
            _, pos = heapq.heappop(heap)
            c = cands[pos]
            s, cost = score(c)
            if s <= 0:
                continue
            if heap and -heap[0][0] > s + 1e-12:
                heapq.heappush(heap, (-s, pos))  # stale score: re-queue (lazy greedy)
                continue
            if used + cost > budget:
                continue
            chosen.append(pos)
            used += cost
            covered.update(c.terms)
            used_units.add(c.unit)
        return chosen

    def _render(
        self,
        units: list[_Unit],
        cands: list[_Candidate],
        chosen: list[int],
        count: Callable[[str], int],
        about: str | None,
        wants: bool,
    ) -> str:
        picked = list(chosen)
        top = None
        if wants:
            by_facts = sorted(
                picked, key=lambda p: -sum(t.startswith("\x00") for t in cands[p].terms)
            )
            top = headline(about, [cands[p].text for p in by_facts])
        while True:
            by_unit: dict[int, list[str]] = {}
            last: dict[int, tuple[int, int, int, str] | None] = {}
            for pos in sorted(picked):
                c = cands[pos]
                texts = by_unit.setdefault(c.unit, [])
                prev = last.get(c.unit)
                if c.source is not None and prev is not None and prev[0] == c.source[0]:
                    gap = c.source[3][prev[2] : c.source[1]]
                    if not gap.strip(" ,;"):  # the next clause: as written
                        texts[-1] += gap + c.text
                        last[c.unit] = c.source
                        continue
                if _open(prev):
                    texts[-1] += " …"  # a clause that does not end its sentence
                texts.append(c.text)
                last[c.unit] = c.source
            for u, prev in last.items():
                if _open(prev):
                    by_unit[u][-1] += " …"
            lines = [top] if top and picked else []
            for u in sorted(by_unit):
                label = units[u][0]
                body = " ".join(by_unit[u])
                lines.append(f"{label}: {body}" if label else body)
            out = "\n".join(lines)
            if count(out) <= self.max_tokens or not picked:
                return out
            if top:
                top = None  # the headline goes first, then the lowest gain per token
                continue
            picked.pop()  # the last pick had the lowest gain per token


def _scan_into(
    items: list[_Item], u: int, text: str, prefs: bool, key: tuple[str, bool] | None
) -> None:
    """Append the sentences of ``text`` with the facts that start in each; a summary
    sentence (``key``) that splits further is not memoized."""
    scan = scan_text(text, prefs)
    sentences, spans = scan.sentences, scan.spans
    if key is not None and len(sentences) != 1:
        key = None
    j = 0
    for start, raw in sentences:
        end = start + len(raw)
        here: list[tuple[str, str]] = []
        while j < len(spans) and spans[j][0] < end:
            if spans[j][0] >= start:
                here.append((spans[j][1], spans[j][2]))
            j += 1
        items.append((u, " ".join(raw.split()), here, None, key))


def _head(sentence: str, limit: int, count: Callable[[str], int]) -> list[tuple[int, int]]:
    """The longest run of ``sentence``'s first words that counts at most ``limit``."""
    ends = [m.start() for m in re.finditer(r"\s", sentence)]
    lo, hi = 0, len(ends)  # invariant: the first lo cut points fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(sentence[: ends[mid - 1]]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return [(0, ends[lo - 1])] if lo else []


def _open(source: tuple[int, int, int, str] | None) -> bool:
    """Whether a clause stops before the end of its sentence (its end marks aside)."""
    return source is not None and bool(source[3][source[2] :].strip(" ,;.!?\"')"))


def _as_written(text: str, folded: str) -> str:
    """``folded`` (a case-folded value) as ``text`` writes it."""
    i = text.casefold().find(folded)
    return text[i : i + len(folded)] if i >= 0 else folded


def _says_nothing(sentence: str, facts: list[tuple[str, str]]) -> bool:
    """No digit and no fact but names, and short or only greetings, thanks and praise
    ("Thanks, Ada!", "Hey John, long time no talk!")."""
    if any(kind != "name" for kind, _ in facts) or _DIGIT.search(sentence) is not None:
        return False
    words = _WORD.findall(sentence)
    return len(words) < 4 or chatter(w for w in words if w.casefold() not in _STOPWORDS)


def _terms(sentence: str) -> dict[str, float]:
    """The sentence's informative words with their boost (numbers, then proper nouns): a
    fresh dict (the caller adds to it) from a memo, since merges re-read old sentences."""
    return dict(_terms_of(sentence))


@functools.lru_cache(maxsize=8192)
def _terms_of(sentence: str) -> tuple[tuple[str, float], ...]:
    terms: dict[str, float] = {}
    for i, w in enumerate(_WORD.findall(sentence)):
        lw = w.lower()
        if lw in _STOPWORDS or (len(lw) < 2 and not lw.isdigit()):
            continue
        boost = 1.0
        if _DIGIT.search(w) is not None:
            boost = 1.6
        elif i and w[0].isupper():
            boost = 1.3
        terms[lw] = max(terms.get(lw, 0.0), boost)
    return tuple(terms.items())


def _calls(message: Message) -> list[str]:
    """``[called name(arguments)]`` for each tool call (arguments cut at 200 characters)."""
    out: list[str] = []
    for block in message.blocks:
        if isinstance(block, ToolUseBlock):
            args = block.arguments()
            if len(args) > 200:
                args = args[:200] + "…"
            out.append(f"[called {block.name}({args})]")
    return out


class TruncatingSummarizer:
    """The first ``chars`` characters of the previous summary plus the new messages,
    with a marker when cut. Cheap and predictable; a baseline more than a summary."""

    name = "truncating"

    def __init__(self, chars: int = 200, *, marker: str = TRUNCATION_MARKER) -> None:
        chars = _check.positive_int("chars", chars)
        if not isinstance(marker, str):
            raise ConfigError(f"marker={marker!r}: must be a string")
        self.chars = chars
        self.marker = marker

    def __repr__(self) -> str:
        return f"TruncatingSummarizer(chars={self.chars})"

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        text = transcript(messages)
        if previous is not None and previous.text:
            text = f"{previous.text}\n{text}" if text else previous.text
        if len(text) <= self.chars:
            return text
        return text[: self.chars].rstrip() + self.marker
