"""Packing: decide which messages of a conversation are sent under a token budget.

A ``Packer`` turns a list of messages into a ``PackResult``: what to send (``kept``),
what was left out (``dropped``) and, for every input message, why. Strategies decide
over *chunks* (``chunks.group_pairs``): a tool call and its results are kept or dropped
together, so the result is always a valid tool-pair list. Orphan results and calls that
were never answered are dropped (reasons ``"orphan"`` / ``"unanswered"``) or, with
``unanswered="stub"``, answered by a synthetic error result.

Strategies come in two kinds:

- any object with ``name`` and ``pack(messages, *, budget, tokenizer, pinned_indices)``
  (the public ``Strategy`` protocol), and
- ``ChunkStrategy`` subclasses (every built-in), which decide over a ``ChunkTable`` of
  chunk costs. The Packer keeps that table from one call to the next: when the new list
  extends the previous one it only chunks and counts the new messages, so an agent loop
  that appends a message and packs again pays for the new message plus what it keeps,
  not for the whole history.

A stage list ``[MaxTurns(20), my_filter, Recency()]`` (or ``Pipeline(...)``) runs
window stages and plain ``list[Message] -> list[Message]`` functions as pre-filters;
the last stage enforces the budget. Stages that do I/O (summarizers, embedders) yield
``Call`` requests from ``plan()``, so ``pack`` and ``pack_async`` share all the logic.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate, chain, islice
from typing import Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

from ._drive import adrive, drive
from .chunks import Chunk, ChunkBuilder, PinSpec, check_pins, stub_result, validate_pairs
from .errors import ConfigError, ConvomemError, InvalidMessage, TokenizerError
from .messages import Message
from .tokens import PER_MESSAGE_TOKENS, Tokenizer, get_tokenizer

REASONS: Final = (
    "pinned",
    "recent",
    "fits",
    "min_keep",
    "budget",
    "duplicate",
    "orphan",
    "unanswered",
    "summarized",
    "max_turns",
    "max_age",
    "head_tail",
    "filtered",
)
"""Every reason a built-in stage gives for keeping or dropping a message."""

Unanswered: TypeAlias = Literal["drop", "stub"]
Placement: TypeAlias = Literal["head", "after_system"]

# Chunk status in a ChunkTable.
OK: Final = 0
ORPHAN: Final = 1
UNANSWERED: Final = 2
STUBBED: Final = 3
_INF: Final = 1 << 62


def check_budget(budget: object, name: str = "budget") -> int:
    """A budget is a positive int; anything else is a ConfigError naming the value."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise ConfigError(f"{name}={budget!r}: budget must be positive (a positive integer)")
    return budget


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


class _Positions:
    """Where each object sits in a list, by identity (an object may occur twice)."""

    __slots__ = ("_at",)

    def __init__(self, items: Sequence[object]) -> None:
        at: dict[int, list[int]] = {}
        for i, m in enumerate(items):
            at.setdefault(id(m), []).append(i)
        self._at = at

    def after(self, m: object, last: int) -> int:
        """The first position of ``m`` after ``last``, or -1."""
        spots = self._at.get(id(m))
        if not spots:
            return -1
        k = bisect_right(spots, last)
        return spots[k] if k < len(spots) else -1


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Decision:
    """Why one input message was kept or dropped."""

    index: int
    id: str
    role: str
    kept: bool
    reason: str
    tokens: int


class PackResult:
    """What a strategy decided: ``kept`` is what to send, in order.

    ``kept`` and ``dropped`` hold the original message objects in their original order.
    The only synthetic messages are ``summary`` (if any) and the ``stubs`` answering
    calls that were never answered (``unanswered="stub"``); both are in ``kept``.
    ``token_count`` is the tokenizer's count of ``kept``; ``headroom`` is
    ``budget - token_count`` (negative when pins or ``min_keep`` forced an overflow).
    ``dropped`` and ``decisions`` are computed on first access.
    """

    __slots__ = (
        "_decisions",
        "_default",
        "_dropped",
        "_explicit",
        "_kept_idx",
        "_kept_reason",
        "_messages",
        "_ranges",
        "_tokenizer",
        "budget",
        "kept",
        "strategy",
        "stubs",
        "summary",
        "token_count",
    )

    def __init__(
        self,
        *,
        messages: Sequence[Message],
        kept: list[Message],
        kept_indices: list[int],
        kept_reasons: list[str],
        token_count: int,
        budget: int,
        tokenizer: Tokenizer,
        summary: Message | None = None,
        stubs: Sequence[Message] = (),
        explicit: Mapping[int, str] | None = None,
        ranges: Sequence[tuple[int, int, str]] = (),
        default_reason: str = "budget",
        strategy: str = "",
    ) -> None:
        self._messages = messages
        self.kept = kept
        self._kept_idx = kept_indices
        self._kept_reason = kept_reasons
        self.token_count = token_count
        self.budget = budget
        self._tokenizer = tokenizer
        self.summary = summary
        self.stubs = tuple(stubs)
        self._explicit = explicit or {}
        self._ranges = tuple(ranges)
        self._default = default_reason
        self.strategy = strategy
        self._dropped: list[Message] | None = None
        self._decisions: list[Decision] | None = None

    @classmethod
    def from_kept(
        cls,
        messages: Sequence[Message],
        kept: Iterable[Message],
        *,
        budget: int,
        tokenizer: str | Tokenizer = "approx",
        reasons: Mapping[int, str] | None = None,
        kept_reason: str = "fits",
        dropped_reason: str = "budget",
        summary: Message | None = None,
        strategy: str = "custom",
    ) -> PackResult:
        """Build a result from the messages a custom strategy keeps (the same objects).

        ``reasons`` maps input indices to a reason; the others get ``kept_reason`` or
        ``dropped_reason``. ``summary`` may appear in ``kept``; if not, it goes first.
        """
        check_budget(budget)
        tok = get_tokenizer(tokenizer)
        msgs = list(messages)
        where = _Positions(msgs)
        out: list[Message] = []
        idx: list[int] = []
        last = -1
        for m in kept:
            if summary is not None and m is summary:
                out.append(m)
                continue
            i = where.after(m, last)
            if i < 0:
                raise ConvomemError(
                    f"strategy {strategy!r}: kept message {m!r} is not one of the input "
                    "messages, or is out of order; keep the original objects in order"
                )
            last = i
            out.append(m)
            idx.append(i)
        if summary is not None and not any(m is summary for m in out):
            out.insert(0, summary)
        reasons = reasons or {}
        return cls(
            messages=msgs,
            kept=out,
            kept_indices=idx,
            kept_reasons=[reasons.get(i, kept_reason) for i in idx],
            token_count=tok.count_messages(out),
            budget=budget,
            tokenizer=tok,
            summary=summary,
            explicit={i: r for i, r in reasons.items() if 0 <= i < len(msgs)},
            default_reason=dropped_reason,
            strategy=strategy,
        )

    @property
    def fits(self) -> bool:
        """True when ``token_count <= budget``."""
        return self.token_count <= self.budget

    @property
    def headroom(self) -> int:
        """``budget - token_count``: room left (negative when over budget)."""
        return self.budget - self.token_count

    @property
    def dropped(self) -> list[Message]:
        """The input messages not sent, in their original order."""
        if self._dropped is None:
            keep = set(self._kept_idx)
            self._dropped = [m for i, m in enumerate(self._messages) if i not in keep]
        return self._dropped

    def _drop_reason(self, i: int) -> str:
        r = self._explicit.get(i)
        if r is not None:
            return r
        for lo, hi, reason in self._ranges:
            if lo <= i < hi:
                return reason
        return self._default

    @property
    def decisions(self) -> list[Decision]:
        """One ``Decision`` per input message, in input order."""
        if self._decisions is None:
            kept = dict(zip(self._kept_idx, self._kept_reason, strict=True))
            count = self._tokenizer.count_message
            out = []
            for i, m in enumerate(self._messages):
                r = kept.get(i)
                out.append(
                    Decision(
                        i,
                        m.id,
                        m.role,
                        r is not None,
                        r if r is not None else self._drop_reason(i),
                        count(m),
                    )
                )
            self._decisions = out
        return self._decisions

    def reason_counts(self) -> dict[str, int]:
        """How many input messages each reason accounts for."""
        counts: dict[str, int] = {}
        for d in self.decisions:
            counts[d.reason] = counts.get(d.reason, 0) + 1
        return counts

    def explain(self) -> str:
        """The decisions as a readable table, with a one-line summary on top."""
        ds = self.decisions
        state = "fits" if self.fits else "OVER BUDGET"
        lines = [
            f"{self.strategy or 'pack'}: kept {len(ds) - len(self.dropped)} of {len(ds)} "
            f"messages, {self.token_count:,} of {self.budget:,} tokens "
            f"({state}, headroom {self.headroom:,})"
        ]
        width = max([8, *(len(d.id) for d in ds[:10_000])])
        width = min(width, 40)
        lines.append(f"{'#':>6}  {'id':<{width}}  {'role':<9}  {'tokens':>6}  kept  reason")
        for d in ds:
            ident = d.id if len(d.id) <= width else d.id[: width - 1] + "…"
            lines.append(
                f"{d.index:>6}  {ident:<{width}}  {d.role:<9}  {d.tokens:>6}  "
                f"{'yes' if d.kept else 'no':<4}  {d.reason}"
            )
        count = self._tokenizer.count_message
        for m in self.kept:
            if m is self.summary:
                what = "summary"
            elif any(m is s for s in self.stubs):
                what = "stub"
            else:
                continue
            ident = m.id if len(m.id) <= width else m.id[: width - 1] + "…"
            lines.append(f"{'+':>6}  {ident:<{width}}  {m.role:<9}  {count(m):>6}  yes   {what}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"PackResult(kept={len(self.kept)}, dropped={len(self._messages) - len(self._kept_idx)}"
            f", token_count={self.token_count}, budget={self.budget}, fits={self.fits})"
        )


# --------------------------------------------------------------------------- protocol


@runtime_checkable
class Strategy(Protocol):
    """Decides what of a list of messages fits a budget.

    ``pinned_indices`` are positions the result must keep. The Packer hands a strategy
    a list that is already valid (orphans and unanswered calls removed or stubbed) and
    enforces tool pairs and pins on what it returns. An optional
    ``async pack_async(...)`` with the same signature is used by ``Packer.pack_async``.
    """

    name: str

    def pack(
        self,
        messages: Sequence[Message],
        *,
        budget: int,
        tokenizer: Tokenizer,
        pinned_indices: Iterable[int],
    ) -> PackResult:
        """Return the decision for ``messages``."""
        ...


@dataclass
class Call:
    """An I/O request a stage's ``plan()`` yields; the driver sends back the result.

    ``pack()`` calls ``fn`` (running it to completion if it returns an awaitable and no
    event loop is running); ``pack_async()`` awaits ``async_fn`` when given, else runs
    ``fn`` in a worker thread when ``offload`` (so a slow sync summarizer does not block
    the loop) and awaits what it returns if that is awaitable. An exception raised by
    the call is thrown into the generator, so a stage may fall back.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    async_fn: Callable[..., Awaitable[Any]] | None = None
    offload: bool = True
    what: str = ""


PlanGen: TypeAlias = Generator[Call, Any, "Selection"]


def _perform(call: Call) -> Any:
    result = call.fn(*call.args, **call.kwargs)
    return _run_awaitable(result, call) if inspect.isawaitable(result) else result


def run_plan(gen: PlanGen) -> Selection:
    """Drive a plan synchronously."""
    return drive(gen, _perform)


def _run_awaitable(result: Awaitable[Any], call: Call) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def wait() -> Any:
            return await result

        return asyncio.run(wait())
    close = getattr(result, "close", None)
    if callable(close):
        close()  # never awaited: avoid the "coroutine was never awaited" warning
    what = call.what or getattr(call.fn, "__qualname__", repr(call.fn))
    raise RuntimeError(
        f"{what} is async and an event loop is running: use `await packer.pack_async(...)` "
        "(or the strategy's pack_async) instead of pack()"
    )


async def _aperform(call: Call) -> Any:
    if call.async_fn is not None:
        result = await call.async_fn(*call.args, **call.kwargs)
    elif call.offload:
        result = await asyncio.to_thread(call.fn, *call.args, **call.kwargs)
    else:
        result = call.fn(*call.args, **call.kwargs)
    return (await result) if inspect.isawaitable(result) else result


async def run_plan_async(gen: PlanGen) -> Selection:
    """Drive a plan in an event loop: async calls awaited, sync ones off the loop."""
    return await adrive(gen, _aperform)


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


# ------------------------------------------------------------------------- selection


@dataclass
class Selection:
    """A budget stage's decision over a table.

    ``kept`` maps free positions kept to a reason; every pinned sendable chunk is kept
    too (reason ``"pinned"``). Other free chunks are dropped with ``dropped[p]`` or
    ``default``. ``notes`` (input index -> reason) and ``ranges`` (``(lo, hi, reason)``
    over input indices) explain messages removed by earlier stages; earlier entries win.
    """

    table: ChunkTable
    kept: dict[int, str] = field(default_factory=dict)
    dropped: dict[int, str] = field(default_factory=dict)
    default: str = "budget"
    summary: Message | None = None
    placement: Placement = "head"
    notes: dict[int, str] = field(default_factory=dict)
    ranges: list[tuple[int, int, str]] = field(default_factory=list)


def _note_bad(table: ChunkTable, notes: dict[int, str]) -> None:
    chunks = table.chunks
    status = table.status
    for p in table.bad_positions():
        reason = "orphan" if status[p] == ORPHAN else "unanswered"
        for i in chunks[p].indices:
            notes.setdefault(i, reason)


def assemble(sel: Selection, budget: int, strategy: str = "") -> PackResult:
    """Turn a selection into a ``PackResult`` (pins added, stubs and summary placed)."""
    table = sel.table
    msgs = table.messages
    chunks = table.chunks
    cost = table.cost
    stubs = table.stubs
    pinned = table.pinned_positions()
    chosen = sel.kept
    positions = sorted(chain(pinned, chosen)) if chosen else pinned
    pin_set = set(pinned)
    kept: list[Message] = []
    kept_idx: list[int] = []
    kept_reason: list[str] = []
    all_stubs: list[Message] = []
    tokens = 0
    getitem = msgs.__getitem__
    for p in positions:
        c = chunks[p]
        idx = c.indices
        kept_idx.extend(idx)
        kept.extend(map(getitem, idx))
        reason = "pinned" if p in pin_set else chosen[p]
        kept_reason.extend([reason] * len(idx))
        tokens += cost[p]
        sb = stubs.get(p)
        if sb:
            kept.extend(sb)
            all_stubs.extend(sb)
    summary = sel.summary
    if summary is not None:
        tokens += table.tokenizer.count_message(summary)
        at = 0
        if sel.placement == "after_system":
            while at < len(kept) and kept[at].role == "system":
                at += 1
        kept.insert(at, summary)
    explicit: dict[int, str] = dict(sel.notes)
    _note_bad(table, explicit)
    for p, reason in sel.dropped.items():
        if p not in pin_set and p not in chosen:
            for i in chunks[p].indices:
                explicit.setdefault(i, reason)
    return PackResult(
        messages=msgs,
        kept=kept,
        kept_indices=kept_idx,
        kept_reasons=kept_reason,
        token_count=tokens,
        budget=budget,
        tokenizer=table.tokenizer,
        summary=summary,
        stubs=all_stubs,
        explicit=explicit,
        ranges=sel.ranges,
        default_reason=sel.default,
        strategy=strategy,
    )


# ------------------------------------------------------------------------- strategies


class ChunkStrategy:
    """Base of the built-in strategies: decide over a ``ChunkTable``.

    Subclasses implement ``select(table, budget) -> Selection`` (pure logic), or
    ``plan(table, budget)``, a generator that may ``yield Call(...)`` for I/O and
    returns a ``Selection``. ``pack`` / ``pack_async`` (the ``Strategy`` protocol)
    chunk and count the messages afresh; a ``Packer`` reuses its table across calls.

    Patterns: a summarizing stage runs ``Recency().select(table, budget - reserve)``,
    yields one ``Call`` to its summarizer, and returns the selection with ``summary``,
    ``placement`` and ``default="summarized"``. A dedup stage marks duplicates, runs
    ``sel = yield from fallback.plan(table.subset(rest), budget)`` and records the
    duplicates' input indices in ``sel.notes`` (reason ``"duplicate"``). Per-chunk
    values worth keeping across calls go in ``table.memo(self)``.
    """

    name: str = "chunk"

    def select(self, table: ChunkTable, budget: int) -> Selection:
        raise NotImplementedError(f"{type(self).__name__} must implement select() or plan()")

    def plan(self, table: ChunkTable, budget: int) -> PlanGen:
        """The decision as a generator (no I/O by default)."""
        return self.select(table, budget)
        yield  # pragma: no cover - makes this a generator

    def _table(
        self,
        messages: Sequence[Message],
        budget: int,
        tokenizer: str | Tokenizer,
        pinned_indices: Iterable[int],
        unanswered: str,
    ) -> ChunkTable:
        check_budget(budget)
        msgs = _as_messages(messages)
        n = len(msgs)
        pins = set()
        for i in pinned_indices:
            if isinstance(i, bool) or not isinstance(i, int):
                raise ConfigError(f"pinned_indices: {i!r} is not an index")
            j = i + n if i < 0 else i
            if 0 <= j < n:
                pins.add(j)
        return ChunkTable.build(
            msgs,
            tokenizer=get_tokenizer(tokenizer),
            pinned_indices=pins,
            unanswered=_check_unanswered(unanswered),
        )

    def pack(
        self,
        messages: Sequence[Message],
        *,
        budget: int,
        tokenizer: str | Tokenizer = "approx",
        pinned_indices: Iterable[int] = (),
        unanswered: str = "drop",
    ) -> PackResult:
        """Decide for ``messages`` (chunked and counted afresh)."""
        table = self._table(messages, budget, tokenizer, pinned_indices, unanswered)
        return assemble(run_plan(self.plan(table, budget)), budget, self.name)

    async def pack_async(
        self,
        messages: Sequence[Message],
        *,
        budget: int,
        tokenizer: str | Tokenizer = "approx",
        pinned_indices: Iterable[int] = (),
        unanswered: str = "drop",
    ) -> PackResult:
        """``pack`` for event loops: I/O calls awaited, sync ones off the loop."""
        table = self._table(messages, budget, tokenizer, pinned_indices, unanswered)
        return assemble(await run_plan_async(self.plan(table, budget)), budget, self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Window:
    """A pre-filter stage over chunks: keeps some free chunks, drops the rest.

    Subclasses implement ``apply(table) -> (keep, runs)``: ``keep`` is the sorted list
    of free positions kept, ``runs`` the ``(first, last)`` position pairs of maximal
    runs of dropped free chunks (no kept free chunk inside a run). Pinned chunks are
    never dropped by a window.
    """

    reason: str = "filtered"
    name: str = "window"

    def apply(self, table: ChunkTable) -> tuple[list[int], list[tuple[int, int]]]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def runs_of(dropped: Iterable[int], free: bytearray) -> list[tuple[int, int]]:
    """Group sorted dropped free positions into runs not broken by a kept free chunk."""
    runs: list[tuple[int, int]] = []
    first = last = -1
    for p in dropped:
        if first >= 0:
            # a kept free chunk between last and p breaks the run
            if any(free[q] for q in range(last + 1, p)):
                runs.append((first, last))
                first = p
        else:
            first = p
        last = p
    if first >= 0:
        runs.append((first, last))
    return runs


Stage: TypeAlias = "Window | Strategy | ChunkStrategy | Callable[[list[Message]], list[Message]]"
"""What a stage list may hold: windows and plain functions, then one budget strategy."""


def _stage_name(stage: object) -> str:
    if isinstance(stage, Window | ChunkStrategy | Strategy):
        return str(stage.name)
    return str(getattr(stage, "__qualname__", None) or repr(stage))


class _Foreign(ChunkStrategy):
    """Runs a user ``Strategy`` on the sendable messages and enforces pairs and pins."""

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy
        self.name = strategy.name

    def plan(self, table: ChunkTable, budget: int) -> PlanGen:
        msgs = table.messages
        pin_set = set(table.pinned_positions())
        seq: list[Message] = []
        owner: list[int] = []
        for p in table.good_positions():
            for i in table.chunks[p].indices:
                seq.append(msgs[i])
                owner.append(p)
            for s in table.stubs.get(p, ()):
                seq.append(s)
                owner.append(p)
        pins = [k for k, p in enumerate(owner) if p in pin_set]
        kwargs = {"budget": budget, "tokenizer": table.tokenizer, "pinned_indices": pins}
        afn = getattr(self.strategy, "pack_async", None)
        result = yield Call(
            self.strategy.pack,
            (seq,),
            kwargs,
            async_fn=afn if callable(afn) else None,
            offload=False,
            what=f"strategy {self.name!r}",
        )
        if not isinstance(result, PackResult):
            raise ConvomemError(
                f"strategy {self.name!r}: pack() must return a PackResult, "
                f"not {type(result).__name__}"
            )
        where = _Positions(seq)
        summary = result.summary
        placement: Placement = "head"
        kept_count: dict[int, int] = {}
        last = -1
        for n, m in enumerate(result.kept):
            if summary is not None and m is summary:
                placement = "head" if n == 0 else "after_system"
                continue
            k = where.after(m, last)
            if k < 0:
                raise ConvomemError(
                    f"strategy {self.name!r}: kept {m!r}, which is not one of the messages "
                    "it was given, or is out of order; keep the original objects in order"
                )
            last = k
            kept_count[owner[k]] = kept_count.get(owner[k], 0) + 1
        reason_of = {d.index: d.reason for d in result.decisions}
        first: dict[int, int] = {}
        size: dict[int, int] = {}
        for k, p in enumerate(owner):
            first.setdefault(p, k)
            size[p] = size.get(p, 0) + 1
        sel = Selection(table, summary=summary, placement=placement)
        for p in first:
            if p in pin_set:
                continue
            reason = reason_of.get(first[p], "budget")
            if kept_count.get(p, 0) == size[p]:
                sel.kept[p] = reason
            elif reason != "budget":
                sel.dropped[p] = reason
        return sel


class Pipeline(ChunkStrategy):
    """Stages run in order: windows and plain functions filter, the last stage packs.

    ``Packer(strategy=[MaxTurns(20), my_filter, Recency()])`` builds one. A function
    stage receives the messages still in play and must return a subsequence of them
    (the same objects, in order); messages it removes get reason ``"filtered"``.
    Pinned messages survive every stage.
    """

    def __init__(self, *stages: object) -> None:
        if len(stages) == 1 and isinstance(stages[0], list | tuple):
            stages = tuple(stages[0])
        if not stages:
            raise ConfigError("strategy=[]: give at least one stage, ending in a budget strategy")
        *pre, last = stages
        for s in pre:
            if isinstance(s, ChunkStrategy | Strategy):
                raise ConfigError(
                    f"strategy: stage {s!r} is a budget strategy; only the last stage may "
                    "enforce the budget (earlier stages are windows or functions)"
                )
            if not isinstance(s, Window) and not callable(s):
                raise ConfigError(
                    f"strategy: stage {s!r} is not a window, a function or a strategy"
                )
        self.stages: tuple[object, ...] = tuple(stages)
        self._pre: tuple[object, ...] = tuple(pre)
        self._last: ChunkStrategy = as_strategy(last)
        self.name = " -> ".join(_stage_name(s) for s in stages)

    def plan(self, table: ChunkTable, budget: int) -> PlanGen:
        notes: dict[int, str] = {}
        ranges: list[tuple[int, int, str]] = []
        t = table
        for stage in self._pre:
            if isinstance(stage, Window):
                keep, runs = stage.apply(t)
                if not runs:
                    continue
                _note_bad(t, notes)
                chunks = t.chunks
                for a, b in runs:
                    ranges.append((chunks[a].start, chunks[b].stop, stage.reason))
                t = t.subset(sorted(chain(t.pinned_positions(), keep)))
            else:
                t = _run_filter(stage, t, notes)
        sel = yield from self._last.plan(t, budget)
        for i, r in sel.notes.items():
            notes.setdefault(i, r)
        sel.notes = notes
        sel.ranges = ranges + sel.ranges
        return sel

    def __repr__(self) -> str:
        return f"Pipeline({', '.join(map(repr, self.stages))})"


def _run_filter(fn: object, t: ChunkTable, notes: dict[int, str]) -> ChunkTable:
    assert callable(fn)
    name = _stage_name(fn)
    _note_bad(t, notes)
    msgs = t.messages
    pinned_idx: set[int] = set()
    for p in t.pinned_positions():
        pinned_idx.update(t.chunks[p].indices)
    idx = [i for p in t.good_positions() for i in t.chunks[p].indices]
    given = [msgs[i] for i in idx]
    out = fn(list(given))
    if isinstance(out, str | bytes) or not isinstance(out, Iterable):
        raise ConvomemError(
            f"stage {name}: must return a list of messages (a subsequence of its input), "
            f"not {type(out).__name__}"
        )
    where = _Positions(given)
    chosen: set[int] = set()
    last = -1
    for j, m in enumerate(out):
        k = where.after(m, last)
        if k < 0:
            raise ConvomemError(
                f"stage {name}: must return a subsequence of its input (the same Message "
                f"objects, in order); item {j} ({m!r}) is not"
            )
        last = k
        chosen.add(idx[k])
    keep = chosen | pinned_idx
    for i in idx:
        if i not in keep:
            notes.setdefault(i, "filtered")
    return ChunkTable.build(
        msgs,
        tokenizer=t.tokenizer,
        pinned_indices=pinned_idx,
        unanswered=t.unanswered,
        stubber=t.stubber,
        include=[i for i in idx if i in keep],
    )


def as_strategy(strategy: object) -> ChunkStrategy:
    """Normalize a strategy option: a strategy, a stage list, or a user ``Strategy``."""
    if isinstance(strategy, list | tuple):
        return Pipeline(*strategy)
    if isinstance(strategy, Window):
        raise ConfigError(
            f"strategy={strategy!r}: a window only filters; end a stage list with a budget "
            f"strategy, e.g. strategy=[{strategy!r}, Recency()]"
        )
    if isinstance(strategy, ChunkStrategy):
        return strategy
    if isinstance(strategy, Strategy):
        return _Foreign(strategy)
    if callable(strategy):
        raise ConfigError(
            f"strategy={strategy!r}: a plain function only filters; end a stage list with a "
            "budget strategy, e.g. strategy=[my_filter, Recency()]"
        )
    raise ConfigError(
        f"strategy={strategy!r}: expected a strategy (name + pack()), or a list of stages "
        "ending in one"
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
            from .strategies.budget import Recency

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
        from .formats.openai import from_openai, to_openai

        return to_openai(self.pack(from_openai(messages)).kept)

    def pack_anthropic(
        self,
        messages: Iterable[Mapping[str, Any]],
        system: str | Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[str | None, list[dict[str, Any]]]:
        """Pack an Anthropic Messages API request; returns ``(system, messages)`` to send."""
        from .formats.anthropic import from_anthropic, to_anthropic

        return to_anthropic(self.pack(from_anthropic(messages, system=system)).kept)

    def __repr__(self) -> str:
        return (
            f"Packer(budget={self._budget}, tokenizer={self._tokenizer.name!r}, "
            f"strategy={self._strategy!r}, pin={self._pin!r})"
        )
