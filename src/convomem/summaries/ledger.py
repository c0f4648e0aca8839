"""FactLedger: facts carried verbatim beside a summary, bounded, updated in O(new facts).

Ranking. Every fact has a rank, compared in this order (higher first):

1. the *tier* of its source (``SOURCE_TIER``): 2 when the user ever stated it, 1 for
   the assistant, system or an unknown source, 0 when it was only seen in tool output;
2. its *value*: ``KIND_VALUE`` of its kind (the name the user gives as theirs 8;
   preferences 6, 8 for one that refuses or warns ("never call me", "allergic to"),
   7 for one that carries a number ("my address is now 1550 Larimer St");
   references, ids and emails 5; names and amounts 4; dates and places 3; bare
   quantities 2) plus one per repeated mention, at most two;
3. recency: the fact first seen later wins a tie.

So a tool result full of amounts never pushes out the user's "I'm allergic to peanuts",
and no place ("moved to Accra") pushes out the user's "my name is Dana Okafor".

Selection. The facts rendered within a token ``budget`` are the longest prefix of the
ranking whose *estimated* rendering fits: the estimate adds the header, an "omitted"
line, one ``"- kind: "`` label per kind present and ``value + "; "`` per fact, each
counted once when the fact arrives (an upper bound for additive tokenizers such as
``approx``). When every fact fits without the "omitted" line, all are taken. The prefix
is then shortened while its real rendering counts over the budget (a tokenizer that does
not add up). Rendered facts appear in first-seen order, grouped by kind.

Storage is bounded too: past ``max_facts`` entries or ``max_stored_tokens`` tokens the
lowest ranked fact is dropped (``dropped`` counts them); a dropped fact seen again
comes back as new.

Cost. The ledger keeps the selection for its own ``budget`` incrementally: two heaps
(the selected prefix, lowest first; the rest, highest first) and one over all entries
for storage drops, with stale items skipped and compacted. A fold's ``add`` costs
O(new facts * log n) plus O(selection); rendering costs O(selection), memoized.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from .. import _check
from ..errors import ConfigError
from ..tokens import Tokenizer, get_tokenizer
from ._fact import Fact, render_facts
from ._heaps import Entry, Selection, rank
from .extraction import extract_from_messages

if TYPE_CHECKING:
    from ..model import Message

__all__ = ["FactLedger", "rank"]


class FactLedger:
    """Facts accumulated from evicted messages: deduplicated, ranked, bounded.

    A fact keeps the message id (and role) it was first seen in; seeing it again counts
    a mention and may raise its rank (see the module docstring for the ranking, the
    selection and the bounds). ``budget`` is the token share whose selection is kept up
    to date as facts arrive (``RunningSummary`` passes its facts share); ``select`` and
    ``render`` with any other budget compute the same rule from scratch.
    """

    def __init__(
        self,
        *,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
        max_facts: int = 10_000,
        max_stored_tokens: int | None = 200_000,
        budget: int | None = None,
    ) -> None:
        self.max_facts = _check.positive_int("max_facts", max_facts)
        self.max_stored_tokens = _check.optional_positive_int(
            "max_stored_tokens", max_stored_tokens
        )
        self.budget = None if budget is None else _check.non_negative_int("budget", budget)
        self._tok = get_tokenizer(tokenizer)
        self._sel_now = Selection(self._tok.count, self.max_facts, self.budget)
        # Rows restored but not filed yet (``restore(..., selected=)``): filed on first use.
        self._lazy: Iterable[tuple[Fact, int, int, int]] | None = None
        self._by_value: dict[str, int] = {}
        self._seq = 0
        self.dropped = 0
        self._memo: dict[int | None, tuple[tuple[Fact, ...], int]] = {}
        self._rendered: dict[int | None, str] = {}

    @property
    def _sel(self) -> Selection:
        if self._lazy is not None:
            rows, self._lazy = self._lazy, None
            self._fill(rows)
        return self._sel_now

    @_sel.setter
    def _sel(self, value: Selection) -> None:
        self._sel_now = value
        self._lazy = None

    # -- writing -------------------------------------------------------------------------

    def add(self, facts: Iterable[Fact]) -> list[Fact]:
        """Record facts; returns those that were new and are still stored (a fact
        dropped again by the same call, to keep the bounds, is not). A non-``Fact`` raises
        ``ConfigError`` before anything is recorded."""
        items = list(facts)
        for fact in items:
            if not isinstance(fact, Fact):
                raise ConfigError(f"fact={fact!r}: must be a Fact")
        return self._apply(items, None)

    def add_messages(self, messages: Iterable[Message]) -> list[Fact]:
        """Extract facts from messages and record them; returns the new ones."""
        return self.add(extract_from_messages(messages))

    def preview(self, facts: Iterable[Fact], max_tokens: int | None = None) -> str:
        """The facts block as it would render after ``add(facts)``, without keeping them
        (the ledger is left exactly as it was). Costs what the ``add`` would."""
        journal: list[tuple[str, Entry, int, int]] = []
        counters = (self._seq, self.dropped)
        try:
            self._apply(list(facts), journal)
            return self.render(self.budget if max_tokens is None else max_tokens)
        finally:
            self._undo(journal, counters)

    def _apply(
        self, facts: list[Fact], journal: list[tuple[str, Entry, int, int]] | None
    ) -> list[Fact]:
        sel = self._sel
        new: list[Entry] = []
        for fact in facts:
            key = fact.key
            entry = sel.entries.get(key)
            if entry is not None:
                if journal is not None:
                    journal.append(("bump", entry, entry.mentions, entry.tier))
                sel.bump(entry, fact.tier)
                continue
            self._seq += 1
            entry = Entry(fact, key, self._seq, 1, fact.tier, sel.cost_of(fact))
            sel.insert(entry)
            self._by_value[key[1]] = self._by_value.get(key[1], 0) + 1
            if journal is not None:
                journal.append(("new", entry, 0, 0))
            new.append(entry)
            while len(sel.entries) > self.max_facts or (
                self.max_stored_tokens is not None and sel.stored > self.max_stored_tokens
            ):
                victim = sel.lowest()
                sel.remove(victim)
                self._forget_value(victim.key[1])
                self.dropped += 1
                if journal is not None:
                    journal.append(("drop", victim, 0, 0))
        sel.rebalance()
        self._forget_renders()
        return [e.fact for e in new if e.alive]

    def _undo(self, journal: list[tuple[str, Entry, int, int]], counters: tuple[int, int]) -> None:
        sel = self._sel
        for op, entry, mentions, tier in reversed(journal):
            if op == "bump":
                sel.restore(entry, mentions, tier)
            elif op == "new":
                sel.remove(entry)
                self._forget_value(entry.key[1])
            else:  # a drop: the entry comes back as it was
                sel.insert(entry)
                self._by_value[entry.key[1]] = self._by_value.get(entry.key[1], 0) + 1
        self._seq, self.dropped = counters
        sel.rebalance()
        self._forget_renders()

    def _forget_renders(self) -> None:
        self._memo.clear()
        self._rendered.clear()

    def _forget_value(self, value: str) -> None:
        n = self._by_value[value] - 1
        if n:
            self._by_value[value] = n
        else:
            del self._by_value[value]

    def clear(self) -> None:
        """Forget every fact."""
        self._sel = Selection(self._tok.count, self.max_facts, self.budget)
        self._by_value.clear()
        self._forget_renders()
        self.dropped = 0

    def copy(self) -> FactLedger:
        """An independent copy (O(n): for snapshots, not for every fold)."""
        other = FactLedger(
            tokenizer=self._tok,
            max_facts=self.max_facts,
            max_stored_tokens=self.max_stored_tokens,
            budget=self.budget,
        )
        for e in sorted(self._sel.entries.values(), key=lambda e: e.seq):
            other._sel.insert(Entry(e.fact, e.key, e.seq, e.mentions, e.tier, e.cost))
            other._by_value[e.key[1]] = other._by_value.get(e.key[1], 0) + 1
        other._sel.rebalance()
        other._seq = self._seq
        other.dropped = self.dropped
        return other

    def restore(
        self,
        entries: Iterable[tuple[Fact, int, int, int]],
        *,
        next_seq: int,
        dropped: int,
        selected: tuple[tuple[Fact, ...], int] | None = None,
    ) -> None:
        """Refill an empty ledger from ``entries()`` rows (``(fact, seq, mentions,
        tier)``), as saved; ``next_seq`` is the saved ``next_seq``. Repeated facts or
        first-seen orders raise ``ConfigError`` and leave the ledger empty.

        ``selected``: the saved ``select(budget)``. Then ``entries`` (any iterable: a
        generator that makes the facts too) is consumed on first use, not now: a
        resumed summary renders from the selection, and a full ledger of 10,000 facts
        is filed only when the next fold needs it; repeated facts raise then."""
        if self._sel.entries:
            raise ConfigError("restore: the ledger must be empty")
        if selected is not None and self.budget is not None:
            self._forget_renders()
            self._lazy = entries  # consumed when filed
            self._memo[self.budget] = selected
        else:
            self._fill(entries)
        self._seq = next_seq
        self.dropped = dropped

    def _fill(self, rows: Iterable[tuple[Fact, int, int, int]]) -> None:
        seqs: set[int] = set()
        keys: set[tuple[str, str]] = set()
        entries: list[Entry] = []
        by_value = self._by_value
        sel = self._sel_now
        try:
            for fact, seq, mentions, tier in rows:
                key = fact.key
                if key in keys or seq in seqs:
                    raise ConfigError(f"fact={fact!r}: appears twice (seq={seq})")
                seqs.add(seq)
                keys.add(key)
                entries.append(Entry(fact, key, seq, mentions, tier, sel.cost_of(fact)))
                by_value[key[1]] = by_value.get(key[1], 0) + 1
            sel.insert_many(entries)
            sel.rebalance()
        except ConfigError:
            self.clear()
            raise
        self._forget_renders()

    # -- reading -------------------------------------------------------------------------

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer that measures the facts."""
        return self._tok

    @property
    def next_seq(self) -> int:
        """The first-seen order given to the last new fact (0 before any)."""
        return self._seq

    @property
    def facts(self) -> tuple[Fact, ...]:
        """Every stored fact, in first-seen order."""
        return tuple(e.fact for e in sorted(self._sel.entries.values(), key=lambda e: e.seq))

    def entries(self) -> list[tuple[Fact, int, int, int]]:
        """``(fact, first-seen seq, mentions, tier)`` of every stored fact, first seen first."""
        ordered = sorted(self._sel.entries.values(), key=lambda e: e.seq)
        return [(e.fact, e.seq, e.mentions, e.tier) for e in ordered]

    def mentions(self, fact: Fact) -> int:
        """How many times a fact was seen (0 if unknown)."""
        entry = self._sel.entries.get(fact.key)
        return 0 if entry is None else entry.mentions

    def __len__(self) -> int:
        return len(self._sel.entries)

    def __iter__(self) -> Iterator[Fact]:
        return iter(self.facts)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Fact):
            return item.key in self._sel.entries
        if isinstance(item, str):
            return " ".join(item.split()).casefold() in self._by_value
        return False

    def select(self, max_tokens: int | None = None) -> tuple[tuple[Fact, ...], int]:
        """The facts rendered within ``max_tokens`` (first-seen order) and how many were
        left out; ``None`` means no limit. Nothing at all (``((), 0)``) when not even the
        best fact fits with the header and the "omitted" line: a bare "(n more facts
        omitted)" note would only spend the share."""
        hit = self._memo.get(max_tokens)
        if hit is not None:
            return hit
        sel = self._sel
        if max_tokens is None or not sel.entries:
            chosen = list(sel.entries.values())
        elif max_tokens == self.budget:
            chosen = sel.selected()
        else:
            chosen = sel.from_scratch(max_tokens)
        result = self._verify(chosen, max_tokens)
        self._memo[max_tokens] = result
        return result

    def _verify(self, chosen: list[Entry], max_tokens: int | None) -> tuple[tuple[Fact, ...], int]:
        """Shorten the ranked prefix ``chosen`` while its real rendering is over budget."""
        total = len(self._sel.entries)
        ordered = sorted(chosen, key=lambda e: e.seq)
        facts = tuple(e.fact for e in ordered)
        if max_tokens is None:
            return facts, 0
        count = self._tok.count
        if facts and count(render_facts(facts, total - len(facts))) <= max_tokens:
            return facts, total - len(facts)
        by_rank = sorted(chosen, key=rank)
        while by_rank:
            by_rank.pop(0)  # the lowest ranked goes first
            keep = sorted(by_rank, key=lambda e: e.seq)
            facts = tuple(e.fact for e in keep)
            if count(render_facts(facts, total - len(facts))) <= max_tokens:
                return facts, total - len(facts)
        return (), 0  # not even the best fact fits: render nothing, not a bare note

    def render(self, max_tokens: int | None = None) -> str:
        """The facts block verbatim within ``max_tokens`` (``""`` when empty)."""
        text = self._rendered.get(max_tokens)
        if text is None:
            facts, omitted = self.select(max_tokens)
            text = self._rendered[max_tokens] = render_facts(facts, omitted)
        return text

    def __repr__(self) -> str:
        return f"<FactLedger {len(self)} facts, budget={self.budget}, dropped={self.dropped}>"
