"""A min segment tree over chunk costs: the nearest chunk that fits in O(log n)."""

from __future__ import annotations

from typing import Final

INF: Final = 1 << 62
"""The value of a leaf that never fits (a pinned or unsendable chunk)."""


class MinTree:
    """Leaves are chunk costs (``INF`` for a chunk that is not free); queries find the nearest
    leaf at most a given room, searching backwards or forwards from a position."""

    __slots__ = ("n", "size", "t")

    def __init__(self) -> None:
        self.size = 1
        self.n = 0
        self.t = [INF, INF]

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
            self.t = [INF] * (2 * size)
            self.t[size : size + len(leaves)] = leaves
            self._fix(0, len(leaves))
            return
        t = self.size
        hi = max(old_n, lo + len(values))
        self.t[t + lo : t + lo + len(values)] = values
        if old_n > n:
            self.t[t + n : t + old_n] = [INF] * (old_n - n)
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
