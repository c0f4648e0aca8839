"""The similarity search behind ``NearDuplicateFinder``: unit vectors, and the numpy and
pure-Python states that resolve new candidates against the survivors, in order.

Both backends do the same arithmetic (scale by the largest magnitude, then normalize;
compare with ``COSINE_TOLERANCE`` of slack), so they give identical answers.
"""

from __future__ import annotations

import math
import operator
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any, Final, cast

from ..errors import EmbeddingError
from .embedders import COSINE_TOLERANCE

COL_CELLS: Final = 1 << 24  # similarity cells computed at once (64 MB of float32)


def _normalize_python(row: Sequence[float]) -> tuple[float, ...] | None:
    # Scale by the largest magnitude first: no overflow or underflow, and a vector is
    # zero exactly when all its numbers are (numpy does the same arithmetic).
    top = max(map(abs, row), default=0.0)
    if top == 0.0:
        return None
    scaled = [x / top for x in row]
    norm = math.sqrt(sum(x * x for x in scaled))
    return tuple(x / norm for x in scaled)


def _normalize_numpy(np: Any, mat: Any) -> tuple[Any, Any]:
    """(mask of nonzero rows, their unit vectors), same arithmetic as the Python path."""
    top = np.abs(mat).max(axis=1) if mat.shape[1] else np.zeros(mat.shape[0])
    nonzero = top > 0
    scaled = mat[nonzero] / top[nonzero, None]
    norms = np.sqrt(np.einsum("ij,ij->i", scaled, scaled))
    return nonzero, scaled / norms[:, None]


class NumpyState:
    """Unit vectors of the candidates seen so far and which of them survive."""

    def __init__(self, np: Any, dim: int) -> None:
        self.np = np
        self.dim = dim
        self.size = 0  # candidates resolved
        self.x64 = np.empty((0, dim))
        self.x32 = np.empty((0, dim), dtype=np.float32)
        self.dup_of = np.empty(0, dtype=np.intp)  # candidate -> candidate it duplicates, or -1
        self.s32 = np.empty((0, dim), dtype=np.float32)  # survivors' rows, in order
        self.surv = np.empty(0, dtype=np.intp)  # survivors' candidate numbers
        self.k = 0

    def truncate(self, size: int) -> None:
        """Forget candidates from ``size`` on (the survivors among them too)."""
        self.size = size
        self.k = int(self.np.searchsorted(self.surv[: self.k], size))

    def _grow(self, name: str, need: int) -> Any:
        arr = getattr(self, name)
        if arr.shape[0] < need:
            new = self.np.empty((max(need, 2 * arr.shape[0]), *arr.shape[1:]), dtype=arr.dtype)
            new[: arr.shape[0]] = arr
            setattr(self, name, new)
            arr = new
        return arr

    def extend(self, unit: Any, threshold: float, block: int) -> None:
        """Resolve new candidates (rows of ``unit``) against the survivors, in order."""
        np = self.np
        start, n = self.size, self.size + unit.shape[0]
        x64, x32 = self._grow("x64", n), self._grow("x32", n)
        dup_of = self._grow("dup_of", n)
        s32, surv = self._grow("s32", n), self._grow("surv", n)
        x64[start:n] = unit
        x32[start:n] = unit
        dup_of[start:n] = -1
        thr = threshold - COSINE_TOLERANCE
        # float32 products find candidates; float64 decides. A float32 dot product of
        # unit vectors is within (dim + 2) * 2**-24 of the exact one: twice that is safe.
        lo = thr - (self.dim + 4) * 2.0**-23
        for b0 in range(start, n, block):
            rows = np.arange(b0, min(b0 + block, n))
            # 1. against the survivors of earlier blocks (earliest match wins)
            step = max(block, COL_CELLS // max(rows.size, 1))
            for c0 in range(0, self.k, step):
                if not rows.size:
                    break
                c1 = min(self.k, c0 + step)
                cand = (x32[rows] @ s32[c0:c1].T) >= lo
                ri = np.flatnonzero(cand.any(axis=1))
                if not ri.size:
                    continue
                ci = np.flatnonzero(cand[ri].any(axis=0))
                cols = surv[c0 + ci]
                hit = (x64[rows[ri]] @ x64[cols].T) >= thr
                found = hit.any(axis=1)
                if found.any():
                    dup_of[rows[ri[found]]] = cols[hit[found].argmax(axis=1)]
                    rows = np.delete(rows, ri[found])
            # 2. within the block, in order, on the small block matrix
            if rows.size > 1:
                cand = np.tril((x32[rows] @ x32[rows].T) >= lo, -1)
                ri = np.flatnonzero(cand.any(axis=1))
                if ri.size:
                    ci = np.flatnonzero(cand[ri].any(axis=0))
                    hit = ((x64[rows[ri]] @ x64[rows[ci]].T) >= thr) & (ci < ri[:, None])
                    alive = np.ones(rows.size, dtype=bool)
                    for a, r in enumerate(ri.tolist()):
                        earlier = ci[hit[a]]
                        if earlier.size:
                            live = earlier[alive[earlier]]
                            if live.size:
                                alive[r] = False
                                dup_of[rows[r]] = rows[live[0]]
                    rows = rows[alive]
            m = rows.size
            s32[self.k : self.k + m] = x32[rows]
            surv[self.k : self.k + m] = rows
            self.k += m
        self.size = n


def _sum_of_products(u: Sequence[float], v: Sequence[float]) -> float:
    total: float = sum(map(operator.mul, u, v))
    return total


_dot: Callable[[Sequence[float], Sequence[float]], float] = getattr(
    math, "sumprod", _sum_of_products
)  # math.sumprod (Python 3.12+) is about 4x faster


class PythonState:
    """The pure-Python twin of ``NumpyState``."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.dup_of: list[int] = []
        self.survivors: list[tuple[int, tuple[float, ...]]] = []

    @property
    def size(self) -> int:
        return len(self.dup_of)

    def truncate(self, size: int) -> None:
        del self.dup_of[size:]
        keep = bisect_left(self.survivors, size, key=operator.itemgetter(0))
        del self.survivors[keep:]

    def extend(self, unit: list[tuple[float, ...]], threshold: float) -> None:
        thr = threshold - COSINE_TOLERANCE
        dot = _dot
        survivors = self.survivors
        for u in unit:
            c = len(self.dup_of)
            target = -1
            for j, v in survivors:
                if dot(u, v) >= thr:
                    target = j
                    break
            self.dup_of.append(target)
            if target < 0:
                survivors.append((c, u))


def unit_rows(np: Any, keys: Sequence[bytes | None], rows: Sequence[int]) -> tuple[list[bool], Any]:
    """The unit vectors of ``keys[i]`` (float64 bytes) for ``i`` in ``rows``.

    Returns which rows are nonzero and their unit vectors (a matrix with numpy, else a
    list of tuples); ``EmbeddingError`` names the first row with a non-finite value.
    """
    bad: int | None
    if np is not None:
        count = len(rows)
        mat = np.frombuffer(b"".join(cast(bytes, keys[i]) for i in rows), np.float64)
        mat = mat.reshape(count, len(mat) // count if count else 0)
        finite = np.isfinite(mat).all(axis=1)
        bad = None if finite.all() else rows[int(np.argmin(finite))]
        if bad is None:
            nonzero_arr, units = _normalize_numpy(np, mat)
            return nonzero_arr.tolist(), units
    else:
        vecs = [array("d", cast(bytes, keys[i])) for i in rows]
        finite_rows = [math.isfinite(sum(r)) or all(map(math.isfinite, r)) for r in vecs]
        bad = None if all(finite_rows) else rows[finite_rows.index(False)]
        if bad is None:
            normalized = [_normalize_python(r) for r in vecs]
            return [u is not None for u in normalized], [u for u in normalized if u is not None]
    raise EmbeddingError(f"vectors[{bad}]: contains a non-finite value")
