"""Built-in summarizers that need no model: extractive and truncating."""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from ..errors import ConfigError
from ..model import Message
from ..tokens import Tokenizer, get_tokenizer
from .facts import (
    KIND_VALUE,
    extract_facts,
    split_sentences,
)
from .summary import (
    SEGMENT_KEY,
    TRUNCATION_MARKER,
    Summary,
    _body,
    clip_to_tokens,
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


@dataclass(slots=True)
class _Candidate:
    unit: int
    pos: int
    text: str
    terms: dict[str, float]
    cost: int


class ExtractiveSummarizer:
    """Offline, deterministic summarizer: the most informative sentences under a budget.

    Sentences are scored by the TF-IDF weight of the terms they add that no chosen
    sentence covers yet (numbers, proper nouns and extracted facts weigh more),
    divided by their token cost, and picked greedily until ``max_tokens``; they are
    kept in their original order, attributed (``user: ...``). The previous summary's
    sentences compete with the new ones, so the result folds both together.
    """

    name = "extractive"

    def __init__(
        self,
        max_tokens: int = 256,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 8:
            raise ConfigError(f"max_tokens={max_tokens!r}: must be an integer of at least 8")
        self.max_tokens = max_tokens
        self._tok = get_tokenizer(tokenizer)

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_tokens={self.max_tokens})"

    def _units(
        self, messages: Sequence[Message], previous: Summary | None
    ) -> list[tuple[str | None, bool, str]]:
        """(label, may-hold-preferences, text) units in order: previous first."""
        units: list[tuple[str | None, bool, str]] = []

        def summary_lines(text: str) -> None:
            for line in text.splitlines():
                line = line.strip()
                if not line:
                    continue
                m = _LABELED.match(line)
                if m:
                    units.append((m.group(1), m.group(1).startswith("user"), m.group(2)))
                else:
                    units.append((None, True, line))

        if previous is not None and previous.text:
            summary_lines(previous.text)
        for msg in messages:
            if msg.metadata.get(SEGMENT_KEY):
                summary_lines(msg.text())
            else:
                body = _body(msg)
                if body.strip():
                    units.append((message_label(msg), msg.role == "user", body))
        return units

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        units = self._units(messages, previous)
        count = self._tok.count
        cap = max(8, self.max_tokens // 2)
        cands: list[_Candidate] = []
        for u, (_label, prefs, text) in enumerate(units):
            for _, sentence in split_sentences(text):
                sentence = " ".join(sentence.split())
                cost = count(sentence) + 1
                if cost > cap:
                    sentence = clip_to_tokens(sentence, cap - 1, count)
                    cost = count(sentence) + 1
                if not sentence:
                    continue
                terms: dict[str, float] = {}
                for i, w in enumerate(_WORD.findall(sentence)):
                    lw = w.lower()
                    if lw in _STOPWORDS or (len(lw) < 2 and not lw.isdigit()):
                        continue
                    boost = 1.0
                    if any(c.isdigit() for c in w):
                        boost = 1.6
                    elif i and w[0].isupper():
                        boost = 1.3
                    terms[lw] = max(terms.get(lw, 0.0), boost)
                for fact in extract_facts(sentence, preferences=prefs):
                    terms["\x00" + "\x1f".join(fact.key)] = 1.0 + KIND_VALUE[fact.kind] / 2
                cands.append(_Candidate(u, len(cands), sentence, terms, cost))
        if not cands:
            return ""
        df: dict[str, int] = {}
        for c in cands:
            for t in c.terms:
                df[t] = df.get(t, 0) + 1
        n = len(cands)
        weight = {t: (1.0 if t.startswith("\x00") else math.log(1 + n / d)) for t, d in df.items()}
        label_cost = [count(f"{label}: ") if label else 0 for label, _, _ in units]
        chosen = self._select(cands, weight, label_cost)
        return self._render(units, cands, chosen, count)

    def _select(
        self, cands: list[_Candidate], weight: dict[str, float], label_cost: list[int]
    ) -> list[int]:
        covered: set[str] = set()
        used_units: set[int] = set()
        budget = self.max_tokens

        def score(c: _Candidate) -> tuple[float, int]:
            gain = sum(weight[t] * b for t, b in c.terms.items() if t not in covered)
            cost = c.cost + (0 if c.unit in used_units else label_cost[c.unit])
            return gain / cost, cost

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
        units: list[tuple[str | None, bool, str]],
        cands: list[_Candidate],
        chosen: list[int],
        count: Callable[[str], int],
    ) -> str:
        picked = list(chosen)
        while True:
            by_unit: dict[int, list[str]] = {}
            for pos in sorted(picked):
                by_unit.setdefault(cands[pos].unit, []).append(cands[pos].text)
            lines = []
            for u in sorted(by_unit):
                label = units[u][0]
                body = " ".join(by_unit[u])
                lines.append(f"{label}: {body}" if label else body)
            out = "\n".join(lines)
            if count(out) <= self.max_tokens or not picked:
                return out
            picked.pop()  # the last pick had the lowest gain per token


class TruncatingSummarizer:
    """The first ``chars`` characters of the previous summary plus the new messages,
    with a marker when cut. Cheap and predictable; a baseline more than a summary."""

    name = "truncating"

    def __init__(self, chars: int = 200, *, marker: str = TRUNCATION_MARKER) -> None:
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
            raise ConfigError(f"chars={chars!r}: must be a positive integer")
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
