"""``Recency``: the newest chunks that fit, the Packer's default budget strategy.

It lives here, not in ``strategies``, because the ``Packer`` defaults to it and every
other strategy builds on the packing room (``strategies`` re-exports it).
"""

from __future__ import annotations

from .. import _check
from .plan import Selection
from .stages import ChunkStrategy
from .table import ChunkTable

__all__ = ["Recency"]


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
