"""ChunkTable: the chunks of a list with their costs, pins and tool-pair status."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import accumulate
from typing import Any, Final, Literal, TypeAlias

from ..errors import ConfigError, InvalidMessage, TokenizerError
from ..model import Chunk, ChunkBuilder, Message, stub_result, validate_pairs
from ..tokens import PER_MESSAGE_TOKENS, Tokenizer

Unanswered: TypeAlias = Literal["drop", "stub"]
Placement: TypeAlias = Literal["head", "after_system"]

# Chunk status in a ChunkTable.
OK: Final = 0
ORPHAN: Final = 1
UNANSWERED: Final = 2
STUBBED: Final = 3
_INF: Final = 1 << 62


def _check_unanswered(value: object) -> Unanswered:
    if value not in ("drop", "stub"):
        raise ConfigError(f"unanswered={value!r}: must be 'drop' or 'stub'")
    return "drop" if value == "drop" else "stub"


def _as_messages(messages: object) -> list[Message]:
    """A private copy of the input list (elements are checked where they are read)."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidMessage("messages", messages, "must be a list of Message objects")
    return list(messages)


def _check_items(messages: Sequence[object], start: int = 0) -> None:
    for i in range(start, len(messages)):
        m = messages[i]
        if type(m) is not Message and not isinstance(m, Message):
            raise InvalidMessage(f"messages[{i}]", m, "must be a Message")


# ---------------------------------------------------------------------------- tables


class _MinTree:
    """A min segment tree over chunk costs: the nearest chunk that fits in O(log n)."""

    __slots__ = ("n", "size", "t")

    def __init__(self) -> None:
        self.size = 1
        self.n = 0
        self.t = [_INF, _INF]

    def assign(self, lo: int, values: list[int], n: int) -> None:
        """Leaves ``[lo, lo + len(values))`` get ``values``; leaves from ``n`` on are unused."""
        old_n = self.n
        if n > self.size:
            size = self.size
            while size < n:
                size *= 2
            leaves = self.t[self.size : self.size + lo] + values
            self.size = size
            self.n = n
            self.t = [_INF] * (2 * size)
            self.t[size : size + len(leaves)] = leaves
            self._fix(0, len(leaves))
            return
        t = self.size
        hi = max(old_n, lo + len(values))
        self.t[t + lo : t + lo + len(values)] = values
        if old_n > n:
            self.t[t + n : t + old_n] = [_INF] * (old_n - n)
        self.n = n
        self._fix(lo, hi)

    def _fix(self, lo: int, hi: int) -> None:
        """Recompute the parents of leaves ``[lo, hi)``."""
        if lo >= hi:
            return
        t = self.t
        lo += self.size
        hi += self.size
        while lo > 1:
            lo //= 2
            hi = (hi + 1) // 2
            t[lo:hi] = map(min, t[2 * lo : 2 * hi : 2], t[2 * lo + 1 : 2 * hi : 2])

    def prev_le(self, j: int, r: int) -> int:
        """The largest ``i < j`` whose value is ``<= r``, or -1."""
        if j <= 0:
            return -1
        t = self.t
        size = self.size
        i = min(j, self.size) - 1 + size
        while True:
            if t[i] <= r:
                while i < size:
                    i = 2 * i + 1
                    if t[i] > r:
                        i -= 1
                return i - size
            while not i & 1:
                i >>= 1
            if i == 1:
                return -1
            i -= 1

    def next_le(self, j: int, r: int) -> int:
        """The smallest ``i >= j`` whose value is ``<= r``, or -1."""
        if j >= self.n:
            return -1
        t = self.t
        size = self.size
        i = j + size
        while True:
            if t[i] <= r:
                while i < size:
                    i = 2 * i
                    if t[i] > r:
                        i += 1
                return i - size
            while i & 1:
                i >>= 1
            if i == 0:
                return -1
            i += 1


Stubber: TypeAlias = Callable[[str], Message]


def countable_stub(call_id: str, tokenizer: Tokenizer) -> Message:
    """``chunks.stub_result(call_id)``, with a token count when the tokenizer needs one.

    The ``given`` tokenizer cannot count a message without ``tokens``; a stub is text
    convomem wrote, so it is estimated with the tokenizer's text count plus overhead.
    """
    stub = stub_result(call_id)
    try:
        tokenizer.count_message(stub)
    except TokenizerError:
        stub = stub.replace(tokens=tokenizer.count(stub.countable_text()) + PER_MESSAGE_TOKENS)
    return stub


def _classify(
    chunk: Chunk, unanswered: Unanswered, stubber: Stubber, tokenizer: Tokenizer
) -> tuple[int, int, tuple[Message, ...]]:
    """A chunk's status, cost (stubs included) and stubs."""
    if chunk.orphan:
        return ORPHAN, chunk.tokens, ()
    if chunk.pending:
        if unanswered == "drop":
            return UNANSWERED, chunk.tokens, ()
        stubs = tuple(stubber(c) for c in sorted(chunk.pending))
        if validate_pairs([*chunk.messages, *stubs]):
            return ORPHAN, chunk.tokens, ()
        return STUBBED, chunk.tokens + tokenizer.count_messages(stubs), stubs
    if len(chunk.messages) > 1 and validate_pairs(chunk.messages):
        return ORPHAN, chunk.tokens, ()  # carries a result that answers no open call
    return OK, chunk.tokens, ()


class ChunkTable:
    """The chunks of a message list with their token costs, pins and tool-pair status.

    This is what ``ChunkStrategy`` subclasses decide over. Positions ``0..len-1`` are
    chunks in order; ``cost[p]`` is the chunk's token count (stubs included);
    ``status[p]`` is ``OK``, ``ORPHAN``, ``UNANSWERED`` (never sent) or ``STUBBED``;
    ``free[p]`` is 1 for a chunk the strategy decides about (sendable and not pinned).
    Pinned sendable chunks are always kept. ``messages`` is the whole input list and
    chunk indices refer to it. Treat every field as read-only.
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
    ) -> None:
        self.messages = messages
        self.chunks = chunks
        self.cost = cost
        self.status = status
        self.free = free
        self.stubs = stubs
        self._pinned = pinned
        self.tokenizer = tokenizer
        self.unanswered: Unanswered = unanswered
        self.stubber = stubber
        self._pmin: list[int] | None = None
        self._smin: list[int] | None = None
        self._system: list[int] | None = None
        self._memo: dict[int, list[Any]] = {}

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
    ) -> ChunkTable:
        """Chunk and count ``messages`` (or only the indices in ``include``) afresh."""
        if stubber is None:
            stubber = partial(countable_stub, tokenizer=tokenizer)
        pins = set(pinned_indices)
        if include is None:
            _check_items(messages)
        builder = ChunkBuilder()
        count = tokenizer.count_message
        for i in range(len(messages)) if include is None else include:
            m = messages[i]
            builder.add(m, i, tokens=count(m), pinned=i in pins)
        chunks = list(builder.chunks)
        cost: list[int] = []
        status: list[int] = []
        free = bytearray(len(chunks))
        stubs: dict[int, tuple[Message, ...]] = {}
        pinned: list[int] = []
        for p, c in enumerate(chunks):
            st, n, sb = _classify(c, unanswered, stubber, tokenizer)
            cost.append(n)
            status.append(st)
            if sb:
                stubs[p] = sb
            if st in (OK, STUBBED):
                if c.pinned:
                    pinned.append(p)
                else:
                    free[p] = 1
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
        )

    def __len__(self) -> int:
        return len(self.chunks)

    def pinned_positions(self) -> list[int]:
        """Sorted positions of the pinned chunks that can be sent (always kept)."""
        return self._pinned

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
        lst = self._memo.get(id(owner))
        if lst is None:
            lst = self._memo[id(owner)] = []
        return lst

    def messages_at(self, p: int) -> list[Message]:
        """The input messages of chunk ``p`` (the caller's objects), in order."""
        msgs = self.messages
        return [msgs[i] for i in self.chunks[p].indices]

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
        return [c if f else _INF for c, f in zip(self.cost, self.free, strict=True)]

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
        )
