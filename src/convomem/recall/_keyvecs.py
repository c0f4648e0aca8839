"""One user's key vectors in memory (``recall.keys``), laid out for an exact scan.

Every item has one or more unit key vectors; its similarity to a query is its best
key's. Keys are kept in *slots*: slot 0 holds every item's first key (the whole text),
in item order, so its scores are the items' scores; slot ``j`` holds the ``j``-th key of
the items that have more than ``j``, with their item numbers. Scoring an item's best is
then a gather and a scatter per slot, and each slot's scan accumulates into an array
the size of that slot (which stays in the CPU's cache far more often than one array of
every key would).

Vectors are stored by column (``dim x capacity``): a sparse query (HashingEmbedder's
touches ~50 of 256 dimensions) reads only the rows of its non-zero dimensions, 4-5x
less memory than a dense product.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Slot:
    """The ``j``-th keys of the items that have one: vectors by column, item numbers."""

    def __init__(self, np: Any, dim: int) -> None:
        self.cols = np.zeros((dim, 16), dtype=np.float32)  # zeros: a scan reads every column
        self.items = np.empty(16, dtype=np.int64)
        self.count = 0

    def append(self, np: Any, block: Any, items: Any) -> None:
        """Add keys (``block``: one row each) of the items numbered ``items``."""
        need = self.count + len(items)
        if need > len(self.items):
            size = max(need, 2 * len(self.items))
            cols = np.zeros((self.cols.shape[0], size), dtype=np.float32)
            cols[:, : self.count] = self.cols[:, : self.count]
            grown = np.empty(size, dtype=np.int64)
            grown[: self.count] = self.items[: self.count]
            self.cols, self.items = cols, grown
        self.cols[:, self.count : need] = block.T
        self.items[self.count : need] = items
        self.count = need


class Snapshot(NamedTuple):
    """The slots as one search sees them: ``(cols, items, count)`` each."""

    slots: tuple[tuple[Any, Any, int], ...]


class KeyVectors:
    """Key vectors of items numbered from 0, appended in order (see the module
    docstring). Not locked: the owning partition appends and snapshots under its lock;
    an append writes past every snapshot's counts, so a snapshot never changes."""

    def __init__(self, np: Any, dim: int) -> None:
        self.np = np
        self.dim = dim
        self.slots = [Slot(np, dim)]

    def nbytes(self) -> int:
        return sum(s.cols.nbytes + s.items.nbytes for s in self.slots)

    def append(self, blobs: list[bytes], first: int) -> None:
        """Add the items numbered ``first`` on, one ``blob`` each (float32 keys)."""
        np = self.np
        width = 4 * self.dim
        counts = np.array([len(b) // width for b in blobs], dtype=np.int64)
        block = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(-1, self.dim)
        starts = np.cumsum(counts) - counts
        # each key's slot: its place among its item's keys
        slot_of = np.arange(len(block)) - np.repeat(starts, counts)
        item_of = np.repeat(np.arange(first, first + len(blobs)), counts)
        for j in range(int(counts.max(initial=0))):
            while len(self.slots) <= j:
                self.slots.append(Slot(np, self.dim))
            pick = slot_of == j
            self.slots[j].append(np, block[pick], item_of[pick])

    def snapshot(self) -> Snapshot:
        return Snapshot(tuple((s.cols, s.items, s.count) for s in self.slots))


def _scan(np: Any, cols: Any, count: int, query: Any, nz: Any, dense: bool) -> Any:
    """Dot products of ``query`` with the first ``count`` columns (float32)."""
    if dense:  # over every column: a slice of the columns is not contiguous, and BLAS
        return (query @ cols)[:count]  # on a strided matrix is ~8x slower than on all
    sims = np.zeros(count, dtype=np.float32)
    for d in nz.tolist():
        sims += query[d] * cols[d, :count]
    return sims


def similarities(np: Any, snap: Snapshot, n: int, query: Any) -> Any:
    """The best dot product with ``query`` over each of the items ``[0, n)``'s keys."""
    nz = np.flatnonzero(query)
    dense = 2 * len(nz) >= len(query)
    cols, _, count = snap.slots[0]
    best = _scan(np, cols, min(count, n), query, nz, dense)
    for cols, items, count in snap.slots[1:]:
        if not count:
            continue
        sims = _scan(np, cols, count, query, nz, dense)
        at = items[:count]
        if count and at[count - 1] >= n:  # keys of items past the view
            keep = at < n
            at, sims = at[keep], sims[keep]
        best[at] = np.maximum(best[at], sims)
    return best
