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

It is a ``views.log.ChunkLog`` (the engine every incremental view shares) with a limit.
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

from collections.abc import Callable, Iterable, Sequence

from .._check import flag, integer, non_negative_int
from ..errors import ConfigError, InvalidMessage, NotAMessage
from ..model import Message, PinPolicy, PinSpec
from ..model.reduce import RESULT_SHARE
from ..model.reduce import result_limit as result_limit_of
from ..tokens import Tokenizer, get_tokenizer
from .log import ChunkLog

__all__ = ["History", "longest_fitting_run"]


class History(ChunkLog):
    """A window over a conversation that drops its oldest messages to stay under a limit.

    ``add(message)`` appends, then drops from the oldest end until the total is at most
    ``limit`` and returns the dropped ids, oldest first. A total equal to the limit fits.

    The current turn (``model.current_turn``: the newest user message that starts a turn,
    and the open exchange after it: an assistant's calls and the results answering them)
    is never dropped: older messages go first, and a turn bigger than the limit on its own
    is kept anyway, with ``over_limit()`` True. A tool result over ``result_limit`` tokens
    is held as a reduced copy (``model.reduce_results``: its head and tail, the same id,
    a marker saying how much was left out); the caller keeps the original. Any other
    message bigger than the limit on its own is dropped (its own id among the dropped).

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
    - ``result_limit``: the most a tool result may take, as a share of ``limit`` (a float
      in (0, 1], default 0.5) or in tokens (an int); None never reduces. Priority-2
      messages are never reduced.
    - ``keep_turn=False``: the current turn is dropped like any other message, and
      ``result_limit=None`` holds results whole: with both, the window is the seed's
      exactly (a message bigger than the limit on its own leaves it empty).

    An orphan result (its call already dropped, or never made) is dropped on arrival,
    even if a pin would select it: a view never holds a result without its call. Every
    successful ``add`` (an orphan's too) takes the next position for positional pins; a
    failed ``add`` changes nothing. Tool call ids are assumed unique within a
    conversation. Not thread-safe: guard a shared window with a lock.
    """

    __slots__ = ()

    def __init__(
        self,
        limit: int,
        *,
        tokenizer: str | Tokenizer | Callable[[str], int] = "given",
        pin: Iterable[PinSpec] | PinSpec | None = (),
        keep_tool_pairs: bool = True,
        target: int | None = None,
        result_limit: float | int | None = RESULT_SHARE,
        keep_turn: bool = True,
    ) -> None:
        limit = non_negative_int("limit", limit)
        if target is not None:
            target = integer("target", target, minimum=0, maximum=limit)
        flag("keep_tool_pairs", keep_tool_pairs)
        super().__init__(
            get_tokenizer(tokenizer),
            PinPolicy(pin, default=()),
            keep_tool_pairs=keep_tool_pairs,
            limit=limit,
            target=target,
            result_limit=result_limit_of(result_limit, limit),
            keep_turn=flag("keep_turn", keep_turn),
        )

    @property
    def limit(self) -> int:
        """The token limit."""
        return self._limit

    @property
    def target(self) -> int | None:
        """What a compaction cuts to (None: to ``limit``)."""
        return self._target

    @property
    def keep_turn(self) -> bool:
        """Whether the current turn is never dropped."""
        return self._keep_turn

    @property
    def keep_tool_pairs(self) -> bool:
        """Whether a tool call and its results are kept and dropped together."""
        return self._keep_pairs

    def over_limit(self) -> bool:
        """True when pinned messages and the current turn alone exceed the limit (the
        window kept them anyway)."""
        return self._total > self._limit

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
            counts.append(self.count(m) if t is None or not self._trust_given else t)
        dropped: list[str] = []
        for m, t in zip(batch, counts, strict=True):
            dropped.extend(self._add_slow(m, t))
        return dropped

    def __repr__(self) -> str:
        target = "" if self._target is None else f", target={self._target}"
        return (
            f"<History limit={self._limit}{target} messages={len(self._ids)} "
            f"total={self._total}{' over_limit' if self.over_limit() else ''}>"
        )


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
