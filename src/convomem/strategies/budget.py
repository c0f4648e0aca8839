"""Budget strategies: which chunks fit the token budget.

Every strategy here keeps the pinned chunks first and then decides over the other
sendable chunks (a tool call with its results is one chunk). ``min_keep`` forces the
newest (``Recency``) or oldest (``FirstFit``) N chunks in even when they overflow the
budget: their reason is ``"min_keep"`` when they did not fit.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from itertools import accumulate

from .. import _check
from ..errors import ConvomemError
from ..model import Message
from ..packing import ChunkStrategy, ChunkTable, Selection


class Recency(ChunkStrategy):
    """Keep the newest chunks that fit, walking back from the newest one.

    Each older chunk is kept if it still fits the room left (``contiguous=False``), so
    a short old message may be kept after a long one was dropped; with
    ``contiguous=True`` the walk stops at the first chunk that does not fit and the
    kept chunks are a strict suffix. ``min_keep`` (default 1: the newest message is
    always sent) forces the newest N chunks in even over budget; the current turn (kept
    before anything else) counts among them.
    """

    name = "recency"

    def __init__(self, min_keep: int = 1, contiguous: bool = False) -> None:
        self.min_keep = _check.non_negative_int("min_keep", min_keep)
        self.contiguous = _check.flag("contiguous", contiguous)

    def select(self, table: ChunkTable, budget: int) -> Selection:
        cost = table.cost
        free = table.free
        room = budget - table.pinned_cost()
        kept: dict[int, str] = {}
        j = len(table)
        turn = table.turn_positions()
        for _ in range(self.min_keep):
            q = table.prev_free(j)
            while turn and turn[-1] >= j:
                turn.pop()
            if turn and turn[-1] > q:  # the newest chunk left is the turn's: kept already
                j = turn.pop()
                continue
            if q < 0:
                break
            room -= cost[q]
            kept[q] = "recent" if room >= 0 else "min_keep"
            j = q
        if self.contiguous:
            while True:
                q = table.prev_free(j)
                if q < 0 or cost[q] > room:
                    break
                room -= cost[q]
                kept[q] = "recent"
                j = q
        else:
            while room >= 0 and j > 0:
                q = j - 1
                if not (free[q] and cost[q] <= room):
                    q = table.prev_fit(j, room)  # jump to the next older chunk that fits
                    if q < 0:
                        break
                room -= cost[q]
                kept[q] = "recent"
                j = q
        return Selection(table, kept)

    def __repr__(self) -> str:
        return f"Recency(min_keep={self.min_keep}, contiguous={self.contiguous})"


class FirstFit(ChunkStrategy):
    """The mirror of ``Recency``: keep the oldest chunks that fit, drop the tail.

    ``min_keep`` forces the oldest N chunks in even over budget.
    """

    name = "first_fit"

    def __init__(self, min_keep: int = 1) -> None:
        self.min_keep = _check.non_negative_int("min_keep", min_keep)

    def select(self, table: ChunkTable, budget: int) -> Selection:
        cost = table.cost
        free = table.free
        n = len(table)
        room = budget - table.pinned_cost()
        kept: dict[int, str] = {}
        j = 0
        for _ in range(self.min_keep):
            q = table.next_free(j)
            if q < 0:
                break
            room -= cost[q]
            kept[q] = "fits" if room >= 0 else "min_keep"
            j = q + 1
        while room >= 0 and j < n:
            q = j
            if not (free[q] and cost[q] <= room):
                q = table.next_fit(j, room)
                if q < 0:
                    break
            room -= cost[q]
            kept[q] = "fits"
            j = q + 1
        return Selection(table, kept)

    def __repr__(self) -> str:
        return f"FirstFit(min_keep={self.min_keep})"


Scorer = Callable[[Message], float]


def default_scorer(message: Message) -> float:
    """System > tool exchanges > user > assistant.

    System messages score 3, messages that call tools or carry results 2, user 1,
    assistant 0.
    """
    if message.role == "system":
        return 3.0
    if message.role == "tool" or message.has_tool_use() or message.has_tool_result():
        return 2.0
    if message.role == "user":
        return 1.0
    return 0.0


class Importance(ChunkStrategy):
    """Drop the lowest-scoring chunks first until the rest fits.

    A chunk scores the max of its messages' scores (``scorer(message) -> number``,
    ``default_scorer`` when None); among equal scores the older chunk goes first.
    Dropping stops as soon as the remaining chunks fit.
    """

    name = "importance"

    def __init__(self, scorer: Scorer | None = None) -> None:
        self.scorer: Scorer = (
            default_scorer
            if scorer is None
            else _check.function("scorer", scorer, "a function message -> number")
        )

    def _score(self, table: ChunkTable, p: int) -> float:
        best: float | None = None
        for m in table.messages_at(p):
            s = self.scorer(m)
            if isinstance(s, bool) or not isinstance(s, int | float) or s != s:
                raise ConvomemError(
                    f"scorer {getattr(self.scorer, '__qualname__', self.scorer)!r} returned "
                    f"{s!r} for message id={m.id!r}; it must return a number"
                )
            if best is None or s > best:
                best = s
        return 0.0 if best is None else float(best)

    def select(self, table: ChunkTable, budget: int) -> Selection:
        cost = table.cost
        scores = table.memo(self)  # a Packer's table keeps the scores of old chunks
        for p in range(len(scores), len(table)):
            scores.append(self._score(table, p))
        candidates = [p for p, f in enumerate(table.free) if f]
        total = table.pinned_cost() + sum(map(cost.__getitem__, candidates))
        need = total - budget
        if need <= 0:
            return Selection(table, dict.fromkeys(candidates, "fits"))
        order = sorted(candidates, key=scores.__getitem__)  # stable: ties, older first
        dropped = list(accumulate(map(cost.__getitem__, order)))
        cut = bisect_left(dropped, need) + 1  # the shortest prefix that frees enough
        return Selection(table, dict.fromkeys(order[cut:], "fits"))

    def __repr__(self) -> str:
        name = "None" if self.scorer is default_scorer else repr(self.scorer)
        return f"Importance(scorer={name})"
