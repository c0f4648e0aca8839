"""ChunkTable: the chunks of a list with their costs, pins and tool-pair status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from itertools import accumulate
from typing import Any, Literal, TypeAlias

from ..errors import InvalidMessage
from ..model import Chunk, ChunkBuilder, Message, opens_exchange, starts_turn, stub_result
from ..tokens import Tokenizer
from ._turn import open_turn as open_turn  # re-exported: it was defined here
from ._turn import pin_turn
from .classify import (
    OK,
    ORPHAN,
    STUBBED,
    UNANSWERED,
    Entry,
    Stubber,
    TableChunk,
    Unanswered,
    classify,
    count_checked,
    countable_stub,
)
from .mintree import INF

Placement: TypeAlias = Literal["head", "after_system"]

__all__ = [
    "OK",
    "ORPHAN",
    "STUBBED",
    "UNANSWERED",
    "ChunkTable",
    "Placement",
    "Stubber",
    "Unanswered",
]


def _as_messages(messages: object) -> list[Message]:
    """A private copy of the input list (elements are checked where they are read)."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidMessage("messages", messages, "must be a list of Message objects")
    return list(messages)


def _check_items(messages: Sequence[object], start: int = 0) -> None:
    if start == 0 and set(map(type, messages)) <= {Message}:
        return  # one C-level pass in the common case
    for i in range(start, len(messages)):
        m = messages[i]
        if type(m) is not Message and not isinstance(m, Message):
            raise InvalidMessage(f"messages[{i}]", m, "must be a Message")


def sent_messages(chunk: Chunk, msgs: Sequence[Message]) -> list[Message]:
    """The messages sent for ``chunk``: the caller's objects, repaired copies in place."""
    repairs = chunk.repairs if isinstance(chunk, TableChunk) else None
    if repairs:
        return [repairs[i] if i in repairs else msgs[i] for i in chunk.indices]
    return [msgs[i] for i in chunk.indices]


def lost_pins(chunk: Chunk) -> list[int]:
    """Input indices pinned in ``chunk``: those pinned on their own (``pinned_at``), or
    all of them for a chunk pinned whole without a record."""
    if chunk.pinned_at:
        return chunk.pinned_at
    return chunk.indices if chunk.pinned else []


class ChunkTable:
    """The chunks of a message list with their token costs, pins and tool-pair status.

    This is what ``ChunkStrategy`` subclasses decide over. Positions ``0..len-1`` are
    chunks in order; ``cost[p]`` is the chunk's token count (stubs and repairs included);
    ``status[p]`` is ``OK``, ``ORPHAN``, ``UNANSWERED`` (never sent) or ``STUBBED``;
    ``free[p]`` is 1 for a chunk the strategy decides about (sendable and not pinned).
    Pinned sendable chunks are always kept; the current turn is among them
    (``turn_positions()``: pinned for the turn only). ``messages`` is the whole input list
    and chunk indices refer to it; ``counts[i]`` (when known) is message ``i``'s token
    count; ``reduced[i]`` the reduced copy sent in place of message ``i`` (a tool result
    over the Packer's ``result_limit``). Treat every field as read-only.
    """

    messages: Sequence[Message]
    chunks: list[Chunk]
    cost: list[int]
    status: list[int]
    free: bytearray
    stubs: dict[int, tuple[Message, ...]]

    def __init__(
        self,
        messages: Sequence[Message],
        chunks: list[Chunk],
        cost: list[int],
        status: list[int],
        free: bytearray,
        stubs: dict[int, tuple[Message, ...]],
        pinned: list[int],
        *,
        tokenizer: Tokenizer,
        unanswered: Unanswered = "drop",
        stubber: Stubber = stub_result,
        counts: Sequence[int] | None = None,
        reduced: Mapping[int, Message] | None = None,
        turn_only: frozenset[int] = frozenset(),
    ) -> None:
        self.messages = messages
        self.reduced: Mapping[int, Message] = {} if reduced is None else reduced
        self.turn_only = turn_only
        """First input indices of the chunks only the current turn pins."""
        self.chunks = chunks
        self.cost = cost
        self.status = status
        self.free = free
        self.stubs = stubs
        self._pinned = pinned
        self.tokenizer = tokenizer
        self.unanswered: Unanswered = unanswered
        self.stubber = stubber
        self.counts = counts
        self._pmin: list[int] | None = None
        self._smin: list[int] | None = None
        self._system: list[int] | None = None
        self._memo: dict[int, tuple[object, list[Any]]] = {}

    @classmethod
    def build(
        cls,
        messages: Sequence[Message],
        *,
        tokenizer: Tokenizer,
        pinned_indices: Iterable[int] = (),
        unanswered: Unanswered = "drop",
        stubber: Stubber | None = None,
        include: Sequence[int] | None = None,
        counts: Sequence[int] | None = None,
        reduced: Mapping[int, Message] | None = None,
        turn_only: frozenset[int] = frozenset(),
        turn: bool = False,
    ) -> ChunkTable:
        """Chunk and count ``messages`` (or only the indices in ``include``) afresh.

        ``counts`` (one per message of ``messages``) are used instead of counting again;
        ``reduced`` copies are chunked in place of their messages (and sent in their
        place); ``turn_only`` says which pinned chunks only the current turn pins;
        ``turn=True`` pins the current turn here (``model.current_turn``), as a
        ``Packer`` does.
        """
        reduced = {} if reduced is None else reduced
        if stubber is None:
            stubber = partial(countable_stub, tokenizer=tokenizer)
        pins = set(pinned_indices)
        if include is None:
            _check_items(messages)
        if counts is None:
            if include is None:
                counts = count_checked(tokenizer, messages)
            else:
                full = [0] * len(messages)
                got = count_checked(tokenizer, [messages[i] for i in include])
                for i, n in zip(include, got, strict=True):
                    full[i] = n
                counts = full
        builder = ChunkBuilder()
        add = builder.add
        exchange: Chunk | None = None
        last = episode = -1  # the newest turn start; the one before the newest exchange
        for i in range(len(messages)) if include is None else include:
            m = reduced.get(i) or messages[i]
            c = add(m, i, tokens=counts[i], pinned=i in pins)
            if not c.orphan and opens_exchange(c.messages[0]):
                if c.messages[-1].has_tool_use():  # a call: the episode of its turn
                    episode = last
                exchange = c
            elif starts_turn(m):
                last = i
        chunks: list[Chunk] = []
        cost: list[int] = []
        status: list[int] = []
        free = bytearray()
        stubs: dict[int, tuple[Message, ...]] = {}
        pinned: list[int] = []
        pos_of: dict[int, int] = {}
        cands = bytearray()
        entries: list[Entry]
        for c in builder.chunks:
            # Most chunks: one message, sent as it is (not a copy without repeated calls).
            if (
                len(c.indices) == 1
                and not c.pending
                and not c.orphan
                and c.messages[0] is messages[c.indices[0]]
            ):
                entries = [(c, OK, c.tokens, (), False)]
            else:
                entries = classify(c, messages, counts, pins.__contains__, unanswered,
                                   stubber, tokenizer)  # fmt: skip
            for chunk, st, n, sb, candidate in entries:
                p = len(chunks)
                chunks.append(chunk)
                cost.append(n)
                status.append(st)
                cands.append(candidate)
                for i in chunk.indices:
                    pos_of[i] = p
                if sb:
                    stubs[p] = sb
                good = st in (OK, STUBBED)
                if good and chunk.pinned:
                    pinned.append(p)
                free.append(1 if good and not chunk.pinned else 0)
        if turn:
            turn_only = pin_turn(builder, last, exchange, episode, pos_of, chunks, status,
                                 free, cands, pinned)  # fmt: skip
        return cls(
            messages,
            chunks,
            cost,
            status,
            free,
            stubs,
            pinned,
            tokenizer=tokenizer,
            unanswered=unanswered,
            stubber=stubber,
            counts=counts,
            reduced=reduced,
            turn_only=turn_only,
        )

    def __len__(self) -> int:
        return len(self.chunks)

    def pinned_positions(self) -> list[int]:
        """Sorted positions of the pinned chunks that can be sent (always kept)."""
        return self._pinned

    def turn_positions(self) -> list[int]:
        """Sorted positions of the pinned chunks only the current turn pins (the newest
        message that starts a turn, the open exchange: ``model.current_turn``)."""
        only = self.turn_only
        if not only:
            return []
        chunks = self.chunks
        return [p for p in self.pinned_positions() if chunks[p].indices[0] in only]

    def pinned_cost(self) -> int:
        """Tokens of the pinned chunks (stubs included)."""
        cost = self.cost
        return sum(cost[p] for p in self.pinned_positions())

    def bad_positions(self) -> list[int]:
        """Sorted positions of chunks that can never be sent (orphan or unanswered)."""
        return [p for p, s in enumerate(self.status) if s in (ORPHAN, UNANSWERED)]

    def good_positions(self) -> list[int]:
        """Sorted positions of every chunk that can be sent (pinned or free)."""
        return [p for p, s in enumerate(self.status) if s in (OK, STUBBED)]

    def system_positions(self) -> list[int]:
        """Sorted positions of the chunks whose first message is a system message."""
        cached = self._system
        if cached is None:
            cached = self._system = [
                p for p, c in enumerate(self.chunks) if c.messages[0].role == "system"
            ]
        return cached

    def memo(self, owner: object) -> list[Any]:
        """A per-position list a strategy may fill (``memo[p]`` for chunk ``p``).

        In a Packer's table it survives across calls and is cut back to the positions
        that did not change, so a strategy computes per-chunk values (scores,
        embeddings) only for new chunks. Values must depend on the chunk's messages only.
        """
        entry = self._memo.get(id(owner))
        if entry is None or entry[0] is not owner:
            if len(self._memo) >= 64:  # owners made per call: do not hold them forever
                self._memo.clear()
            # The entry holds its owner: its id cannot be reused by another object
            # (whose memo this would then be) while the entry lives.
            entry = self._memo[id(owner)] = (owner, [])
        return entry[1]

    def messages_at(self, p: int) -> list[Message]:
        """The input messages of chunk ``p`` (the caller's objects), in order."""
        msgs = self.messages
        return [msgs[i] for i in self.chunks[p].indices]

    def sent_at(self, p: int) -> list[Message]:
        """What is sent for chunk ``p``: its input messages with repaired copies in place
        (stubs not included; they are ``stubs[p]``)."""
        return sent_messages(self.chunks[p], self.messages)

    def prev_free(self, j: int) -> int:
        """The largest free position ``< j``, or -1."""
        free = self.free
        q = j - 1
        while q >= 0 and not free[q]:
            q -= 1
        return q

    def next_free(self, j: int) -> int:
        """The smallest free position ``>= j``, or -1."""
        free = self.free
        n = len(free)
        q = j
        while q < n and not free[q]:
            q += 1
        return q if q < n else -1

    def _free_costs(self) -> list[int]:
        return [c if f else INF for c, f in zip(self.cost, self.free, strict=True)]

    def prev_fit(self, j: int, room: int) -> int:
        """The largest free position ``< j`` whose cost is ``<= room``, or -1."""
        pmin = self._pmin
        if pmin is None:
            pmin = self._pmin = list(accumulate(self._free_costs(), min))
        cost, free = self.cost, self.free
        q = min(j, len(pmin)) - 1
        while q >= 0:
            if pmin[q] > room:
                return -1
            if free[q] and cost[q] <= room:
                return q
            q -= 1
        return -1

    def next_fit(self, j: int, room: int) -> int:
        """The smallest free position ``>= j`` whose cost is ``<= room``, or -1."""
        smin = self._smin
        if smin is None:
            smin = list(accumulate(reversed(self._free_costs()), min))
            smin.reverse()
            self._smin = smin
        cost, free = self.cost, self.free
        n = len(smin)
        q = max(j, 0)
        while q < n:
            if smin[q] > room:
                return -1
            if free[q] and cost[q] <= room:
                return q
            q += 1
        return -1

    def subset(self, positions: Sequence[int]) -> ChunkTable:
        """A table of the chunks at ``positions`` (sorted), pins and statuses unchanged."""
        pinned_set = set(self.pinned_positions())
        cost = self.cost
        status = self.status
        free = self.free
        stubs = self.stubs
        new_stubs: dict[int, tuple[Message, ...]] = {}
        pinned: list[int] = []
        new_free = bytearray(len(positions))
        for q, p in enumerate(positions):
            if p in stubs:
                new_stubs[q] = stubs[p]
            if p in pinned_set:
                pinned.append(q)
            elif free[p]:
                new_free[q] = 1
        return ChunkTable(
            self.messages,
            [self.chunks[p] for p in positions],
            [cost[p] for p in positions],
            [status[p] for p in positions],
            new_free,
            new_stubs,
            pinned,
            tokenizer=self.tokenizer,
            unanswered=self.unanswered,
            stubber=self.stubber,
            counts=self.counts,
            reduced=self.reduced,
            turn_only=self.turn_only,
        )
