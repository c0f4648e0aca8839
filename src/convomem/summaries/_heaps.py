"""The ledger's incremental selection: ranked entries in heaps with lazy deletion.

See ``ledger.py`` for the ranking and the selection rule this maintains.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from ._fact import FACTS_HEADER, KINDS, Fact, label, value_of

Rank = tuple[int, int, int]


@dataclass(slots=True, eq=False)
class Entry:
    """One stored fact and its bookkeeping."""

    fact: Fact
    key: tuple[str, str]
    seq: int
    """First-seen order (1 for the first fact ever recorded)."""
    mentions: int
    tier: int
    """The best ``SOURCE_TIER`` among its mentions."""
    cost: int
    """Estimated tokens of ``value + "; "`` in the rendering."""
    token: int = -1  # the live item of this entry in the selected or the rest heap
    all_token: int = -1  # the live item of this entry in the all-entries heap
    selected: bool = False
    alive: bool = False


def rank(e: Entry) -> Rank:
    """Higher is better: source tier, then kind value (``value_of``) plus mentions (up to
    +2), then the later first-seen."""
    return (e.tier, value_of(e.fact) + min(e.mentions - 1, 2), e.seq)


def _neg(r: Rank) -> Rank:
    return (-r[0], -r[1], -r[2])


class Selection:
    """The entries, and the longest ranked prefix whose estimated rendering fits.

    ``low`` holds the selected prefix (lowest rank on top), ``high`` the others
    (highest on top), ``every`` all entries (lowest on top, for storage drops). An item
    is live while its token matches the entry's; others are skipped and compacted.
    """

    def __init__(self, count: Callable[[str], int], max_facts: int, budget: int | None):
        self.count = count
        self.budget = budget
        self.entries: dict[tuple[str, str], Entry] = {}
        self.stored = 0
        self.fixed = count(FACTS_HEADER + "\n")
        self.reserve = count(f"\n({max_facts} more facts omitted)")
        self.kind_cost = {k: count(label(k)) + count("\n") for k in KINDS}
        self.all_kinds: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.all_kind_cost = 0
        self.sel_kinds: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.sel_kind_cost = 0
        self.sel_cost = 0
        self.sel_n = 0
        self.low: list[tuple[Rank, int, Entry]] = []
        self.high: list[tuple[Rank, int, Entry]] = []
        self.every: list[tuple[Rank, int, Entry]] = []
        self._tokens = itertools.count()
        self._costs: dict[str, int] = {}

    def cost_of(self, fact: Fact) -> int:
        """Tokens of ``value + "; "``, memoized for the last values (a fold previews its
        facts, then adds them)."""
        memo = self._costs
        n = memo.get(fact.value)
        if n is None:
            n = self.count(fact.value + "; ")
            if len(memo) >= 4096:
                memo.pop(next(iter(memo)))
            memo[fact.value] = n
        return n

    # -- membership ----------------------------------------------------------------------

    def _file(self, e: Entry) -> None:
        """(Re)file ``e`` under its current rank in ``low`` or ``high``."""
        e.token = next(self._tokens)
        if e.selected:
            heapq.heappush(self.low, (rank(e), e.token, e))
        elif self.budget is not None:
            heapq.heappush(self.high, (_neg(rank(e)), e.token, e))

    def _push(self, e: Entry) -> None:
        """(Re)file ``e`` everywhere after its rank changed (or it arrived)."""
        self._file(e)
        e.all_token = next(self._tokens)
        heapq.heappush(self.every, (rank(e), e.all_token, e))

    def insert(self, e: Entry) -> None:
        self.entries[e.key] = e
        e.alive, e.selected = True, False
        self.stored += e.cost
        kind = e.fact.kind
        self.all_kinds[kind] += 1
        if self.all_kinds[kind] == 1:
            self.all_kind_cost += self.kind_cost[kind]
        self._push(e)

    def insert_many(self, entries: list[Entry]) -> None:
        """``insert`` each of ``entries`` (new, unselected), with one heapify per heap
        instead of a push each (a restore of a full ledger)."""
        high, every, tokens = self.high, self.every, self._tokens
        for e in entries:
            self.entries[e.key] = e
            e.alive, e.selected = True, False
            self.stored += e.cost
            kind = e.fact.kind
            self.all_kinds[kind] += 1
            if self.all_kinds[kind] == 1:
                self.all_kind_cost += self.kind_cost[kind]
            r = rank(e)
            e.token = next(tokens)
            if self.budget is not None:
                high.append((_neg(r), e.token, e))
            e.all_token = next(tokens)
            every.append((r, e.all_token, e))
        heapq.heapify(high)
        heapq.heapify(every)

    def remove(self, e: Entry) -> None:
        del self.entries[e.key]
        e.alive = False
        e.token = e.all_token = -1
        self.stored -= e.cost
        kind = e.fact.kind
        self.all_kinds[kind] -= 1
        if not self.all_kinds[kind]:
            self.all_kind_cost -= self.kind_cost[kind]
        if e.selected:
            self._unselect(e)

    def bump(self, e: Entry, tier: int) -> None:
        """One more mention (from a source of ``tier``)."""
        before = rank(e)
        e.mentions += 1
        e.tier = max(e.tier, tier)
        if rank(e) != before:
            self._push(e)

    def restore(self, e: Entry, mentions: int, tier: int) -> None:
        if (mentions, tier) != (e.mentions, e.tier):
            e.mentions, e.tier = mentions, tier
            self._push(e)

    def _select(self, e: Entry) -> None:
        e.selected = True
        self.sel_cost += e.cost
        self.sel_n += 1
        kind = e.fact.kind
        self.sel_kinds[kind] += 1
        if self.sel_kinds[kind] == 1:
            self.sel_kind_cost += self.kind_cost[kind]

    def _unselect(self, e: Entry) -> None:
        e.selected = False
        self.sel_cost -= e.cost
        self.sel_n -= 1
        kind = e.fact.kind
        self.sel_kinds[kind] -= 1
        if not self.sel_kinds[kind]:
            self.sel_kind_cost -= self.kind_cost[kind]

    # -- heads of the heaps --------------------------------------------------------------

    def _top(self, heap: list[tuple[Rank, int, Entry]], selected: bool) -> Entry | None:
        while heap:
            _, token, e = heap[0]
            if e.alive and e.token == token and e.selected is selected:
                return e
            heapq.heappop(heap)
        return None

    def lowest(self) -> Entry:
        """The lowest ranked entry of all (the ledger is not empty)."""
        heap = self.every
        while True:
            _, token, e = heap[0]
            if e.alive and e.all_token == token:
                return e
            heapq.heappop(heap)

    # -- the selection -------------------------------------------------------------------

    def _estimate(self, extra: Entry | None = None) -> int:
        cost, kinds = self.sel_cost, self.sel_kind_cost
        if extra is not None:
            cost += extra.cost
            if not self.sel_kinds[extra.fact.kind]:
                kinds += self.kind_cost[extra.fact.kind]
        return self.fixed + self.reserve + cost + kinds

    def _fits_all(self, budget: int) -> bool:
        return self.fixed + self.stored + self.all_kind_cost <= budget

    def rebalance(self) -> None:
        """Restore the selection for ``budget`` after any change (O(moves * log n))."""
        budget = self.budget
        if budget is not None:
            low, high = self.low, self.high
            # 1. the selection is a prefix of the ranking
            while True:
                up, down = self._top(high, False), self._top(low, True)
                if up is None or down is None or rank(up) <= rank(down):
                    break
                self._select(up)
                self._file(up)
            # 2. it fits
            while self.sel_n and self._estimate() > budget:
                down = self._top(low, True)
                assert down is not None
                self._unselect(down)
                self._file(down)
            # 3. it is the longest such prefix
            while (up := self._top(high, False)) is not None and self._estimate(up) <= budget:
                self._select(up)
                self._file(up)
        self._compact()

    def _compact(self) -> None:
        n = len(self.entries)
        if len(self.every) > 2 * n + 64:
            self.every = [it for it in self.every if it[2].alive and it[2].all_token == it[1]]
            heapq.heapify(self.every)
        if len(self.low) > 2 * self.sel_n + 64:
            self.low = [it for it in self.low if it[2].alive and it[2].token == it[1]]
            heapq.heapify(self.low)
        if len(self.high) > 2 * (n - self.sel_n) + 64:
            self.high = [it for it in self.high if it[2].alive and it[2].token == it[1]]
            heapq.heapify(self.high)

    def selected(self) -> list[Entry]:
        """The selection for ``budget``: everything when it all fits without the
        "omitted" line, else the maintained prefix."""
        if self.budget is None or self._fits_all(self.budget):
            return list(self.entries.values())
        return [e for _, token, e in self.low if e.alive and e.selected and e.token == token]

    def from_scratch(self, budget: int) -> list[Entry]:
        """The same rule for another budget, by sorting (O(n log n))."""
        if self._fits_all(budget):
            return list(self.entries.values())
        used = self.fixed + self.reserve
        kinds: set[str] = set()
        out: list[Entry] = []
        for e in sorted(self.entries.values(), key=rank, reverse=True):
            kind = e.fact.kind
            cost = e.cost + (0 if kind in kinds else self.kind_cost[kind])
            if used + cost > budget:
                break
            used += cost
            kinds.add(kind)
            out.append(e)
        return out
