"""The Packer: packs conversations with a strategy, reusing its work across calls."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from typing import Any

from ..model import ChunkBuilder, Message, PinSpec, check_pins
from ..tokens import Tokenizer, get_tokenizer
from .plan import ChunkStrategy, as_strategy, assemble, run_plan, run_plan_async
from .result import PackResult, check_budget
from .table import (
    _INF,
    OK,
    STUBBED,
    ChunkTable,
    Stubber,
    Unanswered,
    _as_messages,
    _check_items,
    _check_unanswered,
    _classify,
    _MinTree,
    countable_stub,
)

# ---------------------------------------------------------------------------- packer


class _LiveTable(ChunkTable):
    """The Packer's table, extended in place when the next list extends the previous."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        pins: tuple[PinSpec, ...],
        unanswered: Unanswered,
        stubber: Stubber,
    ) -> None:
        super().__init__(
            [],
            [],
            [],
            [],
            bytearray(),
            {},
            [],
            tokenizer=tokenizer,
            unanswered=unanswered,
            stubber=stubber,
        )
        self._pin_system = "system" in pins
        self._pin_tools = "tool_results" in pins
        self._pin_first = "first_user" in pins
        self._pin_last = "last_user" in pins
        self._pos_ints = frozenset(p for p in pins if isinstance(p, int) and p >= 0)
        self._neg_ints = tuple(sorted({p for p in pins if isinstance(p, int) and p < 0}))
        self._reset()

    def _reset(self) -> None:
        self.builder = ChunkBuilder()
        self.messages = []
        self.base: list[Message] = []  # the messages the state describes (our own list)
        self.chunks = []
        self.cost = []
        self.status = []
        self.free = bytearray()
        self.stubs = {}
        self.spin: bytearray = bytearray()  # statically pinned (pins fixed by the prefix)
        self.starts: list[int] = []
        self.spin_pos: list[int] = []
        self.bad_pos: list[int] = []
        self._system = []
        self._memo = {}
        self.tree = _MinTree()
        self.first_user: int | None = None
        self.last_user: int | None = None
        self.dyn: list[int] = []  # positions pinned by last_user / negative indices
        self._pinned = []

    def update(self, msgs: list[Message]) -> None:
        """Make the table describe ``msgs`` (reusing the previous state if it is a prefix)."""
        base = self.base
        k = len(base)
        # C-level list comparison: identity first, then Message equality for rebuilt
        # objects (a C-level compare of each message's flat row and metadata).
        extends = k > 0 and len(msgs) >= k and msgs[:k] == base
        start = k if extends else 0
        _check_items(msgs, start)
        count = self.tokenizer.count_message
        counts = [count(m) for m in msgs[start:]]  # may raise: the state is still untouched
        self._unapply_dyn()
        if not extends:
            self._reset()
        self.messages = msgs
        self.base.extend(msgs[start:])
        low = self._add(msgs, start, counts)
        self._refresh(low)
        self._apply_dyn()

    def _add(self, msgs: list[Message], start: int, counts: list[int]) -> int:
        dq = self.builder.chunks
        add = self.builder.add
        low = len(dq)
        pin_system, pin_tools, pin_first = self._pin_system, self._pin_tools, self._pin_first
        pos_ints = self._pos_ints
        for i in range(start, len(msgs)):
            m = msgs[i]
            pinned = (
                m.priority == 2
                or (pin_system and m.role == "system")
                or (pin_tools and m.has_tool_result())
                or i in pos_ints
            )
            if m.role == "user":
                if self.first_user is None:
                    self.first_user = i
                    pinned = pinned or pin_first
                self.last_user = i
            before = len(dq)
            c = add(m, i, tokens=counts[i - start], pinned=pinned)
            if len(dq) != before + 1:  # merged into an earlier chunk: dirty from there
                j = len(dq) - 1
                while dq[j] is not c:
                    j -= 1
                if j < low:
                    low = j
        return low

    def _refresh(self, low: int) -> None:
        dq = self.builder.chunks
        n = len(dq)
        tail = list(islice(reversed(dq), n - low))
        tail.reverse()
        del self.chunks[low:], self.cost[low:], self.status[low:], self.starts[low:]
        del self.free[low:], self.spin[low:]
        del self.spin_pos[bisect_left(self.spin_pos, low) :]
        del self.bad_pos[bisect_left(self.bad_pos, low) :]
        system = self._system
        assert system is not None
        del system[bisect_left(system, low) :]
        for memo in self._memo.values():
            del memo[low:]
        for p in [p for p in self.stubs if p >= low]:
            del self.stubs[p]
        self.chunks.extend(tail)
        values: list[int] = []
        classify_args = (self.unanswered, self.stubber, self.tokenizer)
        for p, c in enumerate(tail, low):
            st, cost, sb = _classify(c, *classify_args)
            self.cost.append(cost)
            self.status.append(st)
            self.starts.append(c.indices[0])
            if c.messages[0].role == "system":
                system.append(p)
            if sb:
                self.stubs[p] = sb
            good = st in (OK, STUBBED)
            if not good:
                self.bad_pos.append(p)
            if good and c.pinned:
                self.spin_pos.append(p)
            self.spin.append(1 if c.pinned else 0)
            is_free = good and not c.pinned
            self.free.append(1 if is_free else 0)
            values.append(cost if is_free else _INF)
        self.tree.assign(low, values, n)

    def release(self) -> None:
        """Drop the caller's list after a call (``base`` holds what later calls compare to).

        A caller that rebuilds its list every turn then frees its old objects itself,
        instead of the next call freeing them.
        """
        self.messages = self.base

    def _pos_of(self, i: int) -> int:
        """The position of the chunk holding message ``i``."""
        chunks = self.chunks
        q = bisect_left(self.starts, i + 1) - 1
        while q >= 0:
            c = chunks[q]
            if c.indices[0] == i or (not c.orphan and c.indices[0] < i < c.stop):
                return q
            q -= 1
        raise AssertionError(f"message {i} is in no chunk")  # pragma: no cover

    def _apply_dyn(self) -> None:
        n = len(self.messages)
        idx: set[int] = set()
        if self._pin_last and self.last_user is not None:
            idx.add(self.last_user)
        for s in self._neg_ints:
            if n + s >= 0:
                idx.add(n + s)
        dyn = sorted({self._pos_of(i) for i in idx})
        dyn = [p for p in dyn if self.free[p]]
        for p in dyn:
            self.free[p] = 0
        self.dyn = dyn
        self._pinned = sorted(self.spin_pos + dyn) if dyn else self.spin_pos

    def _unapply_dyn(self) -> None:
        for p in self.dyn:
            self.free[p] = 1
        self.dyn = []

    def bad_positions(self) -> list[int]:
        return self.bad_pos

    def good_positions(self) -> list[int]:
        if not self.bad_pos:
            return list(range(len(self.chunks)))
        bad = set(self.bad_pos)
        return [p for p in range(len(self.chunks)) if p not in bad]

    def prev_fit(self, j: int, room: int) -> int:
        free = self.free
        while True:
            q = self.tree.prev_le(j, room)
            if q < 0 or free[q]:
                return q
            j = q  # pinned by last_user / a negative index this call: skip it

    def next_fit(self, j: int, room: int) -> int:
        free = self.free
        while True:
            q = self.tree.next_le(j, room)
            if q < 0 or free[q]:
                return q
            j = q + 1


class Packer:
    """Packs conversations into a token budget with a strategy; remembers its last call.

    ``Packer(budget=8000)`` keeps the system prompt (``pin=("system",)``) and the most
    recent chunks that fit (``Recency()``). ``strategy`` is a strategy or a list of
    stages ending in one; ``pin`` takes ``"system"``, ``"first_user"``, ``"last_user"``,
    ``"tool_results"`` and indices (negative from the end); ``unanswered="stub"``
    answers calls that were never answered with an error result instead of dropping
    them. The Packer caches its previous call and is safe to share: a concurrent call
    while one is running works on a fresh table instead of the cache.

    The cache is used when the new list starts with the previous one: the same objects
    (cheap), or equal ``Message`` objects (a list rebuilt every turn costs one
    ``Message.__eq__`` per old message, a C-level compare of two precomputed tuples and
    the metadata, but no token counting). Between calls the Packer holds only the
    messages its cache describes, so a caller's old lists are freed by the caller.
    """

    def __init__(
        self,
        *,
        budget: int,
        tokenizer: str | Tokenizer | Callable[[str], int] = "approx",
        strategy: object = None,
        pin: Iterable[PinSpec] | PinSpec | None = ("system",),
        unanswered: Unanswered = "drop",
    ) -> None:
        self._budget = check_budget(budget)
        self._tokenizer = get_tokenizer(tokenizer)
        if strategy is None:
            from ..strategies.budget import Recency

            strategy = Recency()
        self._strategy = as_strategy(strategy)
        self._pin = check_pins(pin)
        self._unanswered = _check_unanswered(unanswered)
        self._stub_cache: dict[str, Message] = {}
        self._live = _LiveTable(self._tokenizer, self._pin, self._unanswered, self._stub)
        self._lock = threading.Lock()

    @property
    def budget(self) -> int:
        return self._budget

    @property
    def tokenizer(self) -> Tokenizer:
        """The resolved tokenizer object."""
        return self._tokenizer

    @property
    def strategy(self) -> ChunkStrategy:
        """The strategy (a stage list becomes a ``Pipeline``)."""
        return self._strategy

    @property
    def pin(self) -> tuple[PinSpec, ...]:
        return self._pin

    @property
    def unanswered(self) -> Unanswered:
        return self._unanswered

    def _stub(self, call_id: str) -> Message:
        stub = self._stub_cache.get(call_id)
        if stub is None:
            if len(self._stub_cache) > 10_000:
                self._stub_cache.clear()
            stub = self._stub_cache[call_id] = countable_stub(call_id, self._tokenizer)
        return stub

    def _begin(self, messages: Sequence[Message]) -> tuple[ChunkTable, bool]:
        msgs = _as_messages(messages)
        if self._lock.acquire(blocking=False):
            try:
                self._live.update(msgs)
            except BaseException:
                self._live._reset()
                self._lock.release()
                raise
            return self._live, True
        fresh = _LiveTable(self._tokenizer, self._pin, self._unanswered, self._stub)
        fresh.update(msgs)
        return fresh, False

    def pack(self, messages: Sequence[Message]) -> PackResult:
        """Decide what of ``messages`` to send."""
        table, locked = self._begin(messages)
        try:
            sel = run_plan(self._strategy.plan(table, self._budget))
            return assemble(sel, self._budget, self._strategy.name)
        finally:
            if locked:
                self._live.release()
                self._lock.release()

    async def pack_async(self, messages: Sequence[Message]) -> PackResult:
        """``pack`` for event loops: async summarizers and embedders are awaited."""
        table, locked = self._begin(messages)
        try:
            sel = await run_plan_async(self._strategy.plan(table, self._budget))
            return assemble(sel, self._budget, self._strategy.name)
        finally:
            if locked:
                self._live.release()
                self._lock.release()

    def pack_openai(self, messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Pack OpenAI Chat Completions dicts; returns the dicts to send."""
        from ..formats.openai import from_openai, to_openai

        return to_openai(self.pack(from_openai(messages)).kept)

    def pack_anthropic(
        self,
        messages: Iterable[Mapping[str, Any]],
        system: str | Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[str | None, list[dict[str, Any]]]:
        """Pack an Anthropic Messages API request; returns ``(system, messages)`` to send."""
        from ..formats.anthropic import from_anthropic, to_anthropic

        return to_anthropic(self.pack(from_anthropic(messages, system=system)).kept)

    def __repr__(self) -> str:
        return (
            f"Packer(budget={self._budget}, tokenizer={self._tokenizer.name!r}, "
            f"strategy={self._strategy!r}, pin={self._pin!r})"
        )
