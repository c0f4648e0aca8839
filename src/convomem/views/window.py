"""The incremental window: a token-bounded view of a conversation, kept as messages arrive.

``History(limit)`` keeps the newest messages whose token counts sum to at most ``limit``.
Each ``add`` costs amortized O(1) plus the messages it drops: the window holds a deque of
units and a running total, counts every message exactly once, and never re-sums or
re-chunks what it already holds.

The unit of eviction is a chunk (``convomem.chunks``): with ``keep_tool_pairs=True`` an
assistant tool call and the results answering it enter and leave together, and a result
whose call is not in the window is dropped on arrival, so the window never holds an
orphan. Pinned messages are never dropped; they count toward the total, and when they
alone exceed the limit the window keeps them and ``over_limit()`` says so.

How it stays O(1): a message that neither calls a tool, nor answers one, nor is pinned is
stored as a bare ``(message, tokens)`` pair (the fast path). Everything else lives in a
``Chunk`` built by ``ChunkBuilder``. A pinned chunk that reaches the oldest end while the
window compacts moves to a side table (``_held``), so later compactions never walk over
it again. Dynamic pins (``"last_user"``, negative indices) release a message as newer
ones arrive; a released chunk still in the deque is simply droppable in place, and a
released chunk in the side table goes on a small heap (``_loose``) that compaction drains
first, because it is older than everything in the deque.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from ..errors import ConfigError, InvalidMessage, NotAMessage, TokenizerError
from ..model import Chunk, ChunkBuilder, Message, PinSpec, check_pins
from ..tokens import BaseTokenizer, Tokenizer, get_tokenizer

__all__ = ["History", "longest_fitting_run"]

_Plain = tuple[Message, int]
_Entry = _Plain | Chunk

_BASE_COUNT: Final = BaseTokenizer.count_message


class History:
    """A window over a conversation that drops its oldest messages to stay under a limit.

    ``add(message)`` appends, then drops from the oldest end until the total is at most
    ``limit`` and returns the dropped ids, oldest first. A total equal to the limit fits;
    a message bigger than the limit on its own leaves the window empty (its own id among
    the dropped).

    Options (keyword-only):

    - ``tokenizer``: a spec for ``get_tokenizer`` or a tokenizer (default ``"given"``:
      ``Message.tokens``). A given ``tokens`` count is always trusted.
    - ``pin``: pin specs, as for ``chunks.resolve_pins``: ``"system"``, ``"first_user"``,
      ``"last_user"``, ``"tool_results"``, or integer positions in the sequence of
      messages added so far (negative ones count from the newest, so ``-1`` pins whichever
      message is newest). Priority-2 messages are always pinned. A chunk holding a pinned
      message is pinned whole. Pins that move (``"last_user"``, negative positions)
      release the older message, which may then be dropped.
    - ``keep_tool_pairs``: keep a tool call and its results together (default True).
      False makes every message its own unit and keeps results whatever happened to
      their call.
    - ``target``: hysteresis. The window compacts only when the total passes ``limit``,
      and then cuts to at most ``target``, keeping the newest messages, so the kept
      prefix stays stable between compactions (which keeps provider prompt caches warm).

    An orphan result (its call already dropped, or never made) is dropped on arrival,
    even if a pin would select it: a view never holds a result without its call. Every
    successful ``add`` (an orphan's too) takes the next position for positional pins; a
    failed ``add`` changes nothing. Tool call ids are assumed unique within a
    conversation. Not thread-safe: guard a shared window with a lock.
    """

    __slots__ = (
        "_builder",
        "_check_pins",
        "_dq",
        "_dyn",
        "_first_user",
        "_held",
        "_ids",
        "_keep_pairs",
        "_last_user",
        "_lim",
        "_limit",
        "_loose",
        "_n",
        "_neg",
        "_neg_max",
        "_pin_first_user",
        "_pin_indices",
        "_pin_last_user",
        "_pin_system",
        "_pin_tool_results",
        "_plain_ok",
        "_target",
        "_tokenizer",
        "_total",
        "_track",
        "_trust_given",
    )

    def __init__(
        self,
        limit: int,
        *,
        tokenizer: str | Tokenizer | Callable[[str], int] = "given",
        pin: Iterable[PinSpec] | PinSpec | None = (),
        keep_tool_pairs: bool = True,
        target: int | None = None,
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ConfigError(f"limit={limit!r}: must be a positive integer")
        if target is not None and (
            isinstance(target, bool) or not isinstance(target, int) or not 0 <= target <= limit
        ):
            raise ConfigError(f"target={target!r}: must be an integer from 0 to limit={limit}")
        if not isinstance(keep_tool_pairs, bool):
            raise ConfigError(f"keep_tool_pairs={keep_tool_pairs!r}: must be True or False")
        specs = tuple(dict.fromkeys(check_pins(pin)))
        tok = get_tokenizer(tokenizer)

        self._limit = limit
        self._target = target
        self._lim = limit if target is None else target
        self._tokenizer = tok
        # Inlining BaseTokenizer.count_message's first branch (a given count is trusted)
        # saves a call per message; a subclass that overrides count_message is always called.
        self._trust_given = (
            isinstance(tok, BaseTokenizer) and type(tok).count_message is _BASE_COUNT
        )
        self._keep_pairs = keep_tool_pairs
        self._builder: ChunkBuilder | None = ChunkBuilder() if keep_tool_pairs else None

        self._pin_system = "system" in specs
        self._pin_first_user = "first_user" in specs
        self._pin_tool_results = "tool_results" in specs
        self._pin_last_user = "last_user" in specs
        self._pin_indices = frozenset(s for s in specs if isinstance(s, int) and s >= 0)
        self._neg = tuple(sorted(-s for s in specs if isinstance(s, int) and s < 0))
        self._neg_max = self._neg[-1] if self._neg else 0
        # Whether some spec might pin a plain message (priority 2 is checked apart).
        self._check_pins = bool(
            self._pin_system or self._pin_first_user or self._pin_last_user or self._pin_indices
        )

        self._dq: deque[_Entry] = deque()  # kept units not in _held, oldest first
        self._held: dict[int, Chunk] = {}  # pinned chunks that reached the oldest end
        self._loose: list[int] = []  # heap of starts of released chunks in _held
        self._dyn: dict[Chunk, int] = {}  # chunk -> how many moving pins hold it
        self._track: dict[int, Chunk] = {}  # position -> chunk, for moving pins
        self._ids: set[str] = set()
        self._total = 0
        self._n = 0  # messages added so far (the next message's position)
        self._first_user = False  # a user message was added
        self._last_user = -1  # position of the newest user message
        # Plain unpinned messages may be stored as bare pairs: no negative pin can reach
        # them later and no open tool call can pull them into an exchange.
        self._plain_ok = not self._neg

    # -- reading -----------------------------------------------------------------------

    @property
    def limit(self) -> int:
        """The token limit."""
        return self._limit

    @property
    def target(self) -> int | None:
        """What a compaction cuts to (None: to ``limit``)."""
        return self._target

    @property
    def keep_tool_pairs(self) -> bool:
        """Whether a tool call and its results are kept and dropped together."""
        return self._keep_pairs

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer that counts the messages."""
        return self._tokenizer

    def total(self) -> int:
        """Tokens held by the window (pinned messages included)."""
        return self._total

    def over_limit(self) -> bool:
        """True when pinned messages alone exceed the limit (the window kept them anyway)."""
        return self._total > self._limit

    def kept(self) -> list[Message]:
        """The messages in the window, oldest first."""
        out: list[Message] = []
        for c in self._held.values():
            out.extend(c.messages)
        for e in self._dq:
            if isinstance(e, tuple):
                out.append(e[0])
            else:
                out.extend(e.messages)
        return out

    def messages(self) -> list[str]:
        """The ids of the messages in the window, oldest first."""
        return [m.id for m in self.kept()]

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._ids

    def __repr__(self) -> str:
        target = "" if self._target is None else f", target={self._target}"
        return (
            f"<History limit={self._limit}{target} messages={len(self._ids)} "
            f"total={self._total}{' over_limit' if self.over_limit() else ''}>"
        )

    # -- adding ------------------------------------------------------------------------

    def add(self, message: Message) -> list[str]:
        """Append ``message``, compact if needed; return the dropped ids, oldest first.

        Raises ``NotAMessage`` for a non-message, ``InvalidMessage`` for an id already in
        the window, and the tokenizer's error for a message it cannot count; a failed add
        leaves the window exactly as it was.
        """
        if type(message) is not Message and not isinstance(message, Message):
            raise NotAMessage(
                "message", message, f"must be a Message, not {type(message).__name__}"
            )
        mid = message.id
        ids = self._ids
        if mid in ids:
            raise InvalidMessage("id", mid, "is already in the window")
        t = message.tokens
        if t is None or not self._trust_given:
            t = self._count(message)
        if not (
            self._plain_ok
            and type(message.content) is str
            and message.priority != 2
            and (not self._check_pins or not self._pins_plain(message))
        ):
            return self._add_slow(message, t)
        # Fast path: a plain message (no tools, no pins) becomes a bare (message, tokens) pair.
        self._n += 1
        ids.add(mid)
        dq = self._dq
        dq.append((message, t))
        total = self._total + t
        if total <= self._limit:
            self._total = total
            return []
        # Drop the oldest pairs inline; chunks, pins and released pins go to _compact.
        e = dq.popleft()  # never empty: the new message is in it
        if type(e) is not tuple or self._loose:
            dq.appendleft(e)
            dropped: list[str] = []
            self._total = self._compact(total, dropped)
            return dropped
        old = e[0].id
        total -= e[1]
        ids.discard(old)
        dropped = [old]
        lim = self._lim
        while total > lim and dq:
            e = dq.popleft()
            if type(e) is not tuple:
                dq.appendleft(e)
                total = self._compact(total, dropped)
                break
            old = e[0].id
            total -= e[1]
            ids.discard(old)
            dropped.append(old)
        self._total = total
        return dropped

    def add_many(self, messages: Iterable[Message]) -> list[str]:
        """Add messages in order; return every id dropped, oldest first.

        The batch is checked whole before anything is added (types, ids unique within
        the batch and not in the window now, token counts), so a bad message leaves the
        window untouched.
        """
        batch = list(messages)
        counts: list[int] = []
        seen: set[str] = set()
        ids = self._ids
        for i, m in enumerate(batch):
            if not isinstance(m, Message):
                raise NotAMessage(f"messages[{i}]", m, f"must be a Message, not {type(m).__name__}")
            if m.id in ids or m.id in seen:
                raise InvalidMessage(f"messages[{i}].id", m.id, "is already in the window")
            seen.add(m.id)
            t = m.tokens
            counts.append(self._count(m) if t is None or not self._trust_given else t)
        dropped: list[str] = []
        for m, t in zip(batch, counts, strict=True):
            dropped.extend(self._add_slow(m, t))
        return dropped

    # -- internals ---------------------------------------------------------------------

    def _count(self, message: Message) -> int:
        n = self._tokenizer.count_message(message)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise TokenizerError(
                f"tokenizer {self._tokenizer.name!r} counted {n!r} tokens for message "
                f"id={message.id!r}; need a non-negative integer"
            )
        return n

    def _pins_plain(self, m: Message) -> bool:
        """Whether a spec pins ``m``, a next message with text content and priority < 2."""
        role = m.role
        return (
            self._n in self._pin_indices
            or (role == "system" and self._pin_system)
            or (
                role == "user"
                and (self._pin_last_user or (self._pin_first_user and not self._first_user))
            )
        )

    def _pinned_by_spec(self, m: Message, index: int) -> bool:
        """Whether a pin that never moves selects ``m`` (at position ``index``)."""
        if m.priority == 2 or index in self._pin_indices:
            return True
        role = m.role
        if role == "system" and self._pin_system:
            return True
        if role == "user" and self._pin_first_user and not self._first_user:
            return True
        return self._pin_tool_results and m.has_tool_result()

    def _add_slow(self, message: Message, t: int) -> list[str]:
        """The general add: tool exchanges, pins, moving pins (``t`` already counted)."""
        index = self._n
        builder = self._builder
        static = self._pinned_by_spec(message, index)
        plain = (
            not static
            and not (self._pin_last_user and message.role == "user")
            and not _has_tool_blocks(message)
        )

        target: Chunk | None = None
        orphan = False
        if builder is not None and not plain and message.has_tool_result():
            target = builder.joins(message)
            orphan = target is None

        # From here on nothing can fail: mutate.
        self._n = index + 1
        if message.role == "user":
            self._first_user = True
        dq = self._dq
        chunk: Chunk | None = None
        if not orphan:
            self._ids.add(message.id)
            self._total += t
            if plain and self._plain_ok:
                dq.append((message, t))
            elif builder is None:
                chunk = Chunk([message], [index], static, t)
                dq.append(chunk)
            else:
                if target is not None and self._held.get(target.start) is target:
                    self._unhold(target)
                before = len(builder.chunks)
                chunk = builder.add(message, index, tokens=t, pinned=static)
                if chunk is target:
                    for _ in range(before - len(builder.chunks)):
                        dq.pop()  # the chunks merged into the target
                    if self._track:
                        self._retarget(chunk)
                else:
                    dq.append(chunk)

        self._move_pins(message, index, chunk)
        dropped: list[str] = []
        if self._total > self._limit:
            self._total = self._compact(self._total, dropped)
        if orphan:
            dropped.append(message.id)
        if builder is not None and not self._neg:
            self._plain_ok = not builder.has_open_calls()
        return dropped

    def _move_pins(self, message: Message, index: int, chunk: Chunk | None) -> None:
        """Apply the moving pins ("last_user", negative positions) for a new message."""
        if not (self._pin_last_user or self._neg):
            return
        track = self._track
        if chunk is not None:
            track[index] = chunk
        n = index + 1
        for k in self._neg:  # -k pins position n - k and releases n - 1 - k
            self._pin_at(n - k)
        old_user = self._last_user
        if self._pin_last_user and message.role == "user":
            self._pin_at(index)
            self._last_user = index
            if old_user >= 0:
                self._release_at(old_user)
        for k in self._neg:
            self._release_at(n - 1 - k)
        # Forget positions no moving pin can reach again.
        gone = n - 1 - self._neg_max
        if gone >= 0 and gone != self._last_user:
            track.pop(gone, None)
        if old_user != self._last_user and 0 <= old_user < n - self._neg_max:
            track.pop(old_user, None)

    def _pin_at(self, index: int) -> None:
        chunk = self._track.get(index)
        if chunk is not None:
            self._dyn[chunk] = self._dyn.get(chunk, 0) + 1

    def _release_at(self, index: int) -> None:
        chunk = self._track.get(index)
        if chunk is None:
            return
        left = self._dyn[chunk] - 1
        if left:
            self._dyn[chunk] = left
            return
        del self._dyn[chunk]
        if not chunk.pinned and self._held.get(chunk.start) is chunk:
            heapq.heappush(self._loose, chunk.start)

    def _retarget(self, chunk: Chunk) -> None:
        """After newer chunks merged into ``chunk``, point moving-pin records at it."""
        start = chunk.start
        track = self._track
        for i, c in track.items():
            if c.start > start:
                track[i] = chunk
        dyn = self._dyn
        for c in [c for c in dyn if c.start > start]:
            dyn[chunk] = dyn.get(chunk, 0) + dyn.pop(c)

    def _unhold(self, target: Chunk) -> None:
        """Put ``target`` and every newer held chunk back at the deque's oldest end.

        A result answering a call in a held chunk merges everything from that call on,
        so those chunks must be where ``ChunkBuilder`` merges: in its deque.
        """
        assert self._builder is not None
        held = self._held
        moved: list[Chunk] = []
        while True:
            _, c = held.popitem()  # held is ordered by position: newest last
            moved.append(c)
            if c is target:
                break
        self._dq.extendleft(moved)
        self._builder.chunks.extendleft(moved)

    def _compact(self, total: int, dropped: list[str]) -> int:
        """Drop the oldest droppable units until the total is at most the cut; return it."""
        lim = self._lim
        dq = self._dq
        held = self._held
        loose = self._loose
        dyn = self._dyn
        builder = self._builder
        ids = self._ids
        while total > lim:
            if loose:  # released held chunks are older than anything in the deque
                c = held.get(heapq.heappop(loose))
                if c is None or c.pinned or c in dyn:
                    continue  # stale: merged, re-pinned or already gone
                del held[c.start]
                total -= c.tokens
                self._drop(c, dropped)
                continue
            if not dq:
                break
            e = dq.popleft()
            if isinstance(e, tuple):
                old = e[0].id
                total -= e[1]
                ids.discard(old)
                dropped.append(old)
                continue
            if builder is not None:
                builder.chunks.popleft()  # mirrors the Chunk entries of the deque
            if e.pinned or e in dyn:
                held[e.start] = e
            else:
                total -= e.tokens
                self._drop(e, dropped)
        return total

    def _drop(self, chunk: Chunk, dropped: list[str]) -> None:
        ids = self._ids
        for m in chunk.messages:
            ids.discard(m.id)
            dropped.append(m.id)
        builder = self._builder
        if chunk.pending and builder is not None:
            builder.discard(chunk)
            if not self._neg:
                self._plain_ok = not builder.has_open_calls()
        track = self._track
        if track:
            for i in chunk.indices:
                if track.get(i) is chunk:
                    del track[i]


def _has_tool_blocks(m: Message) -> bool:
    return type(m.content) is not str and (m.has_tool_use() or m.has_tool_result())


def longest_fitting_run(counts: Sequence[int], target: int) -> tuple[int, int]:
    """The longest contiguous run ``counts[start:stop]`` whose sum is at most ``target``.

    Ties go to the most recent run. Linear time (two pointers; counts are non-negative,
    so the best run ending at each position starts where the previous one did or later).
    When no single count fits, the run is empty and ``(len(counts), len(counts))`` is
    returned (so ``counts[start:stop]`` is ``[]``, and an empty input gives ``(0, 0)``).

    ``[9000, 2000, 2500, 3000, 1500, 4000, 2000, 1000]`` with 10000 gives ``(4, 8)``.
    """
    if isinstance(target, bool) or not isinstance(target, int) or target < 0:
        raise ConfigError(f"target={target!r}: must be a non-negative integer")
    if isinstance(counts, str | bytes) or not isinstance(counts, Sequence):
        raise ConfigError(f"counts={counts!r}: must be a sequence of non-negative integers")
    for i, c in enumerate(counts):
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise ConfigError(f"counts[{i}]={c!r}: must be a non-negative integer")
    n = len(counts)
    best_start = best_stop = n
    best_len = 0
    start = 0
    s = 0
    for stop, c in enumerate(counts, 1):
        s += c
        while s > target:
            s -= counts[start]
            start += 1
        if stop - start >= best_len and stop > start:
            best_len = stop - start
            best_start, best_stop = start, stop
    return best_start, best_stop
