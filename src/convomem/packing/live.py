"""The Packer's table: kept across calls and extended in place when a list grows."""

from __future__ import annotations

import dataclasses
from bisect import bisect_left
from collections.abc import Callable
from itertools import islice

from ..model import Chunk, ChunkBuilder, Message, PinPolicy, opens_exchange, starts_turn
from ..tokens import Tokenizer
from ._turn import open_turn
from .classify import (
    OK,
    STUBBED,
    Stubber,
    TableChunk,
    Unanswered,
    classify,
    count_checked,
)
from .mintree import INF, MinTree
from .table import ChunkTable, _check_items, lost_pins


class LiveTable(ChunkTable):
    """A ``ChunkTable`` that describes the last list it was given and grows with it.

    ``update(msgs)`` reuses the previous state when ``msgs`` starts with the messages it
    describes (``base``, its own list): only new messages are counted and chunked, and
    only the chunks they change are classified again. Static pins (``PinPolicy.static``)
    are decided when a message arrives; moving pins (``last_user``, negative indices) and
    the current turn (``model.current_turn``: the newest message that starts a turn, the
    open exchange; ``turn_only`` records what only the turn holds) are applied for one
    call and undone before the next (``dyn``: free chunks pinned; ``flips``: tool-free
    candidates made sendable; ``swaps``: unsendable chunks recorded as losing a moving
    pin). A new message carrying a tool result over ``result_limit`` tokens is chunked as
    its reduced copy (``reduce``; ``reduced`` maps its index to it), sent in its place like
    a repaired copy. ``version`` changes with every update.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        policy: PinPolicy,
        unanswered: Unanswered,
        stubber: Stubber,
        *,
        result_limit: int | None = None,
        reduce: Callable[[Message, int], Message] | None = None,
        keep_turn: bool = True,
    ) -> None:
        super().__init__(
            [], [], [], [], bytearray(), {}, [],
            tokenizer=tokenizer, unanswered=unanswered, stubber=stubber,
        )  # fmt: skip
        self.policy = policy
        self.result_limit = result_limit
        self.reduce = reduce
        self.keep_turn = keep_turn
        self.version = 0
        self.reset()

    def reset(self) -> None:
        """Forget everything described (after a failed update: the next one starts over)."""
        self.builder = ChunkBuilder()
        self.messages = []
        self.base: list[Message] = []
        self.counts: list[int] = []
        self.pin_msg = bytearray()  # static pin of each message
        self.chunks = []
        self.cost = []
        self.status = []
        self.free = bytearray()
        self.stubs = {}
        self.cand = bytearray()  # 1 for a tool-free candidate split off an unsendable chunk
        self.pos_of: list[int] = []  # the table position of each message
        self.bstart: list[int] = []  # first table position of each builder chunk
        self.spin_pos: list[int] = []  # sendable positions pinned statically
        self.bad_pos: list[int] = []
        self._system = []
        self._memo = {}
        self.tree = MinTree()
        self.seen_user = False
        self.last_user = -1
        self.last_turn = -1  # the newest message that starts a turn
        self.exchange: Chunk | None = None  # the newest builder chunk that is an exchange
        self.episode = -1  # the turn start before the newest call
        self._reduced_at: dict[int, Message] = {}
        self.reduced = self._reduced_at
        self.turn_only = frozenset()
        self.dyn: list[int] = []
        self.flips: list[tuple[int, int]] = []  # (position, its unsendable status)
        self.swaps: list[tuple[int, Chunk]] = []
        self._pinned = []

    def update(self, msgs: list[Message], *, trusted: bool = False) -> None:
        """Make the table describe ``msgs``.

        ``trusted`` says the caller knows ``msgs`` starts with ``base`` (the same
        objects), so the O(n) comparison is skipped. A failure (a bad item, a tokenizer
        error) raises before any state changes.
        """
        base = self.base
        k = len(base)
        # C-level list comparison: identity first, then Message equality (one compare
        # of each message's flat row and metadata) for rebuilt objects.
        extends = len(msgs) >= k and (trusted or (k > 0 and msgs[:k] == base))
        start = k if extends else 0
        _check_items(msgs, start)
        counts = count_checked(self.tokenizer, msgs[start:] if start else msgs)
        self._unapply_dyn()
        if not extends:
            self.reset()
        self.version += 1
        self.messages = msgs
        self.base.extend(msgs[start:] if start else msgs)
        self.counts.extend(counts)
        self.pos_of.extend([-1] * len(counts))
        low = self._add(msgs, start, counts)
        self._refresh(low)
        self._apply_dyn()

    def _add(self, msgs: list[Message], start: int, counts: list[int]) -> int:
        """Chunk the new messages; the first builder chunk they changed."""
        dq = self.builder.chunks
        add = self.builder.add
        low = len(dq)
        static = self.policy.static
        pin_msg = self.pin_msg
        seen_user = self.seen_user
        limit = self.result_limit
        reduce = self.reduce
        for i in range(start, len(msgs)):
            m = msgs[i]
            n = counts[i - start]
            pinned = static(m, i, seen_user)
            if m.role == "user":
                seen_user = True
                self.last_user = i
                if starts_turn(m):
                    self.last_turn = i
            pin_msg.append(pinned)
            if limit is not None and reduce is not None and n > limit and m.priority < 2:
                r = reduce(m, n)  # the builder's chunk holds the copy, counted as a repair
                if r is not m:
                    self._reduced_at[i] = m = r
            before = len(dq)
            c = add(m, i, tokens=n, pinned=pinned)
            if not c.orphan and opens_exchange(c.messages[0]):
                if c.messages[-1].has_tool_use():  # a call: the episode of its turn
                    self.episode = self.last_turn
                self.exchange = c
            if len(dq) != before + 1:  # merged into an earlier chunk: dirty from there
                j = len(dq) - 1
                while dq[j] is not c:
                    j -= 1
                if j < low:
                    low = j
        self.seen_user = seen_user
        return low

    def _pinned_at(self, i: int) -> bool:
        return self.pin_msg[i] == 1

    def _refresh(self, low: int) -> None:
        """Classify builder chunks ``low..`` again (their table positions are rebuilt)."""
        dq = self.builder.chunks
        tail = list(islice(reversed(dq), len(dq) - low))
        tail.reverse()
        chunks, cost, status, pos_of = self.chunks, self.cost, self.status, self.pos_of
        free, cand, stubs, bstart = self.free, self.cand, self.stubs, self.bstart
        spin_pos, bad_pos, system = self.spin_pos, self.bad_pos, self._system
        assert system is not None
        t0 = bstart[low] if low < len(bstart) else len(chunks)
        del chunks[t0:], cost[t0:], status[t0:], free[t0:], cand[t0:], bstart[low:]
        del spin_pos[bisect_left(spin_pos, t0) :]
        del bad_pos[bisect_left(bad_pos, t0) :]
        del system[bisect_left(system, t0) :]
        for _owner, memo in self._memo.values():
            del memo[t0:]
        for p in [p for p in stubs if p >= t0]:
            del stubs[p]
        values: list[int] = []
        args = (self.base, self.counts, self._pinned_at, self.unanswered, self.stubber,
                self.tokenizer)  # fmt: skip
        base = self.base
        for c in tail:
            p = len(chunks)
            bstart.append(p)
            idx = c.indices
            # most chunks: one message sent as it is (not a copy), inline
            if len(idx) == 1 and not c.pending and not c.orphan and c.messages[0] is base[idx[0]]:
                n = c.tokens
                chunks.append(c)
                cost.append(n)
                status.append(OK)
                pos_of[idx[0]] = p
                cand.append(0)
                if c.messages[0].role == "system":
                    system.append(p)
                if c.pinned:
                    spin_pos.append(p)
                    free.append(0)
                    values.append(INF)
                else:
                    free.append(1)
                    values.append(n)
                continue
            for chunk, st, n, sb, is_cand in classify(c, *args):
                p = len(chunks)
                chunks.append(chunk)
                cost.append(n)
                status.append(st)
                for i in chunk.indices:
                    pos_of[i] = p
                cand.append(is_cand)
                if chunk.messages[0].role == "system":
                    system.append(p)
                if sb:
                    stubs[p] = sb
                if st != OK and st != STUBBED:
                    bad_pos.append(p)
                    free.append(0)
                    values.append(INF)
                elif chunk.pinned:
                    spin_pos.append(p)
                    free.append(0)
                    values.append(INF)
                else:
                    free.append(1)
                    values.append(n)
        self.tree.assign(t0, values, len(chunks))

    def release(self) -> None:
        """Drop the caller's list after a call (``base`` holds what later calls compare to).

        A caller that rebuilds its list every turn then frees its old objects itself,
        instead of the next call freeing them.
        """
        self.messages = self.base

    def _apply_dyn(self) -> None:
        policy = self.policy
        free, status, chunks = self.free, self.status, self.chunks
        swapped: set[int] = set()
        moving = policy.moving_positions(len(self.base), self.last_user) if policy.moving else ()
        for i in sorted(moving):
            p = self.pos_of[i]
            c = chunks[p]
            if free[p]:
                free[p] = 0
                self.dyn.append(p)
            elif self.cand[p] and status[p] != OK:  # a tool-free message: sent on its own
                assert isinstance(c, TableChunk)
                self.flips.append((p, status[p]))
                status[p] = OK
                c.pinned = True
                c.pinned_at = [i]
                continue
            if i not in c.pinned_at:  # record the pin on the chunk (what it holds or loses)
                chunks[p] = _with_pins(c, sorted({*lost_pins(c), i}))
                if p not in swapped:
                    swapped.add(p)
                    self.swaps.append((p, c))
        turn: list[int] = []
        turn_at: list[int] = []
        if self.keep_turn:
            turn_at = open_turn(
                self.builder, self.last_turn, self.exchange, self.episode, self.pos_of, status
            )
        for p in turn_at:
            c = chunks[p]
            if free[p]:
                free[p] = 0
                self.dyn.append(p)
            elif self.cand[p] and status[p] != OK:  # the newest user message, tool-free,
                assert isinstance(c, TableChunk)  # in an exchange never answered: alone
                self.flips.append((p, status[p]))
                status[p] = OK
                c.pinned = True
                c.pinned_at = [c.indices[0]]
            else:
                continue  # pinned already (or unsendable)
            turn.append(c.indices[0])
        self.turn_only = frozenset(turn)
        extra = self.dyn + [p for p, _ in self.flips]
        self._pinned = sorted(self.spin_pos + extra) if extra else self.spin_pos

    def _unapply_dyn(self) -> None:
        for p in self.dyn:
            self.free[p] = 1
        for p, st in self.flips:
            c = self.chunks[p]
            assert isinstance(c, TableChunk)
            self.status[p] = st
            c.pinned = False
            c.pinned_at = []
        for p, old in reversed(self.swaps):
            self.chunks[p] = old
        self.dyn, self.flips, self.swaps = [], [], []
        self.turn_only = frozenset()

    def bad_positions(self) -> list[int]:
        if not self.flips:
            return self.bad_pos
        flipped = {p for p, _ in self.flips}
        return [p for p in self.bad_pos if p not in flipped]

    def good_positions(self) -> list[int]:
        bad = self.bad_positions()
        if not bad:
            return list(range(len(self.chunks)))
        skip = set(bad)
        return [p for p in range(len(self.chunks)) if p not in skip]

    def prev_fit(self, j: int, room: int) -> int:
        free = self.free
        while True:
            q = self.tree.prev_le(j, room)
            if q < 0 or free[q]:
                return q
            j = q  # pinned by a moving pin this call: skip it

    def next_fit(self, j: int, room: int) -> int:
        free = self.free
        while True:
            q = self.tree.next_le(j, room)
            if q < 0 or free[q]:
                return q
            j = q + 1


def _with_pins(chunk: Chunk, pins: list[int]) -> TableChunk:
    """A copy of an unsendable chunk recording ``pins`` as the pins it loses."""
    fields = {f.name: getattr(chunk, f.name) for f in dataclasses.fields(chunk)}
    fields.update(pinned=True, pinned_at=pins)
    return TableChunk(**fields)
