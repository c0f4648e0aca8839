"""Exact near-duplicate search over embedding vectors."""

from __future__ import annotations

import math
import numbers
import operator
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any, Final, cast

from ..errors import ConfigError, EmbeddingError
from .cache import _as_vector, _short
from .embedders import COSINE_TOLERANCE, Backend, Vector, _is_int, _resolve_backend

# -- near-duplicate search -------------------------------------------------------------

_COL_CELLS: Final = 1 << 24  # similarity cells computed at once (64 MB of float32)


def _check_options(threshold: float, backend: str, block_size: int) -> Any:
    """Validate the search options; return the numpy module to use, or None."""
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, numbers.Real)
        or not 0 < threshold <= 1
    ):
        raise ConfigError(f"threshold={threshold!r}: must be a number in (0, 1]")
    if not _is_int(block_size) or block_size < 1:
        raise ConfigError(f"block_size={block_size!r}: must be a positive integer")
    return _resolve_backend(backend, "find_near_duplicates")


def _row_key(v: Any) -> bytes:
    """The float64 bytes of one vector (ValueError if it is not a sequence of numbers)."""
    if type(v) is memoryview and v.format == "d" and v.ndim == 1:
        obj = v.obj
        if type(obj) is bytes and len(obj) == v.nbytes and v.c_contiguous:
            return obj  # a vector from EmbeddingCache: no copy
        return v.tobytes()
    return _as_vector(v).tobytes()


_UNTRUSTED: Final = object()  # never identical to a vector


def _row_keys(
    np: Any,
    vectors: Any,
    flags: list[bool],
    prev: tuple[list[Any], list[bytes | None], list[bool]],
) -> tuple[list[bytes | None], list[Any], int | None]:
    """Each eligible vector's float64 bytes (None for the others) and its identity tag.

    A tag is the vector object itself when it is immutable (a bytes-backed float64
    memoryview, as EmbeddingCache returns) or ineligible, else a sentinel. ``prev``
    holds the previous call's tags, keys and flags: an unchanged leading run of identical
    objects is recognised with C-level identity tests and its keys are reused. Also
    returns the vectors' common length (None without eligible vectors).
    """
    n = len(flags)
    if (
        np is not None
        and isinstance(vectors, np.ndarray)
        and vectors.ndim == 2
        and vectors.dtype.kind in "biuf"
    ):
        mat = np.ascontiguousarray(vectors, dtype=np.float64)
        keys: list[bytes | None] = [mat[i].tobytes() if f else None for i, f in enumerate(flags)]
        return keys, [_UNTRUSTED] * n, mat.shape[1] if any(flags) else None
    prev_tags, prev_keys, prev_flags = prev
    same = list(map(operator.is_, vectors, prev_tags))  # stops at the shorter list
    start = same.index(False) if False in same else len(same)
    if flags[:start] != prev_flags[:start]:
        start = next(i for i in range(start) if flags[i] != prev_flags[i])
    keys = prev_keys[:start] + [None] * (n - start)
    tags = prev_tags[:start] + [_UNTRUSTED] * (n - start)
    dim: int | None = None
    first = -1
    for i in range(start):
        key = keys[i]
        if key is not None:
            dim, first = len(key) // 8, i
            break
    for i in range(start, n):
        v = vectors[i]
        if not flags[i]:
            tags[i] = v
            continue
        try:
            key = _row_key(v)
        except ValueError as exc:
            raise EmbeddingError(f"vectors[{i}]: {exc}") from None
        if type(v) is memoryview and v.obj is key:
            tags[i] = v
        if dim is None:
            dim, first = len(key) // 8, i
        elif len(key) != 8 * dim:
            raise EmbeddingError(
                f"vectors[{i}]: has {len(key) // 8} numbers; vectors[{first}] has {dim}"
            )
        keys[i] = key
    return keys, tags, dim


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


class _NumpyState:
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
            step = max(block, _COL_CELLS // max(rows.size, 1))
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


class _PythonState:
    """The pure-Python twin of ``_NumpyState``."""

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


class NearDuplicateFinder:
    """``find_near_duplicates`` that reuses its previous call's work.

    When a call's input starts like the previous one (equal vectors with the same
    eligibility), only the vectors from the first difference on are compared, against
    the survivors before it: an agent loop that appends a message and searches again
    pays O(survivors) per new message instead of a quadratic search. A vector equal to
    an earlier candidate is resolved like it without any comparison. ``computed``
    counts the candidate vectors resolved and ``compared`` those among them that
    needed a similarity search: deterministic measures of work.
    """

    def __init__(
        self, threshold: float, *, backend: Backend = "auto", block_size: int = 1024
    ) -> None:
        self._np = _check_options(threshold, backend, block_size)
        self.threshold = float(threshold)
        self.backend = backend
        self.block_size = block_size
        self.computed = 0
        self.compared = 0
        self.reset()

    def reset(self) -> None:
        """Forget the previous call."""
        self._keys: list[bytes | None] = []
        self._tags: list[Any] = []  # the last call's vectors where identity proves equality
        self._flags: list[bool] = []
        self._positions: list[int] = []  # candidate -> index in the input
        # candidate -> its row in the backend state, or ~c: "an exact copy of candidate c"
        self._links: list[int] = []
        self._rows: list[int] = []  # backend row -> candidate
        self._first: dict[bytes, int] = {}  # a row's bytes -> the candidate holding it
        self._first_order: list[bytes] = []  # keys of _first, by candidate
        self._target: list[int] = []  # candidate -> the candidate it duplicates, or -1
        self._result: dict[int, int] = {}  # the answer, in increasing order
        self._state: _NumpyState | _PythonState | None = None

    def _common_prefix(self, keys: list[bytes | None]) -> int:
        same = list(map(operator.eq, self._keys, keys))  # C-level; None == None
        return same.index(False) if False in same else len(same)

    def find(self, vectors: Sequence[Vector] | Any, eligible: Sequence[bool]) -> dict[int, int]:
        """Map each near-duplicate's index to the earlier surviving index it repeats."""
        np = self._np
        n = len(vectors)
        if len(eligible) != n:
            raise ConfigError(
                f"eligible={_short(eligible)}: has {len(eligible)} flags for {n} vectors"
            )
        flags = [bool(e) for e in eligible]
        keys, tags, dim = _row_keys(np, vectors, flags, (self._tags, self._keys, self._flags))
        state = self._state
        fresh = state is None or dim is None or state.dim != dim
        keep = 0 if fresh else self._common_prefix(keys)
        cand_keep = bisect_left(self._positions, keep)
        first = self._first
        # Which new rows are exact copies of an earlier candidate or of each other.
        new_pos = [i for i in range(keep, n) if flags[i]]
        local: dict[bytes, int] = {}  # bytes -> number among the new distinct rows
        refs: list[int] = []  # per new row: distinct row u, or ~c for old candidate c
        distinct: list[int] = []  # new distinct rows' positions
        for p in new_pos:
            key = cast(bytes, keys[p])
            c = None if fresh else first.get(key)
            if c is not None and c < cand_keep:
                refs.append(~c)
                continue
            u = local.get(key)
            if u is None:
                u = local[key] = len(distinct)
                distinct.append(p)
            refs.append(u)
        # Validate and normalize the distinct new rows before touching any state.
        units: Any
        if np is not None:
            count = len(distinct)
            mat = np.frombuffer(b"".join(cast(bytes, keys[i]) for i in distinct), np.float64)
            mat = mat.reshape(count, len(mat) // count if count else 0)
            finite = np.isfinite(mat).all(axis=1)
            bad = None if finite.all() else distinct[int(np.argmin(finite))]
            if bad is None:
                nonzero_arr, units = _normalize_numpy(np, mat)
                nonzero: list[bool] = nonzero_arr.tolist()
        else:
            rows = [array("d", cast(bytes, keys[i])) for i in distinct]
            finite_rows = [math.isfinite(sum(r)) or all(map(math.isfinite, r)) for r in rows]
            bad = None if all(finite_rows) else distinct[finite_rows.index(False)]
            if bad is None:
                normalized = [_normalize_python(r) for r in rows]
                nonzero = [u is not None for u in normalized]
                units = [u for u in normalized if u is not None]
        if bad is not None:
            raise EmbeddingError(f"vectors[{bad}]: contains a non-finite value")
        # Commit.
        if fresh:
            self.reset()
            cand_keep = 0
            state = None if dim is None else _NumpyState(np, dim) if np else _PythonState(dim)
            self._state = state
        positions, links, backend_rows = self._positions, self._links, self._rows
        first, order = self._first, self._first_order
        del positions[cand_keep:], links[cand_keep:]
        del backend_rows[bisect_left(backend_rows, cand_keep) :]
        while order and first[order[-1]] >= cand_keep:
            del first[order.pop()]
        cand_of: list[int] = [-1] * len(distinct)  # distinct new row -> its candidate
        for p, ref in zip(new_pos, refs, strict=True):
            if ref < 0:
                link = ref
            elif not nonzero[ref]:
                continue  # a zero vector is not a candidate
            elif cand_of[ref] >= 0:
                link = ~cand_of[ref]
            else:
                cand_of[ref] = len(positions)
                link = len(backend_rows)
                backend_rows.append(len(positions))
                key = cast(bytes, keys[p])
                first[key] = len(positions)
                order.append(key)
            positions.append(p)
            links.append(link)
        self.computed += len(positions) - cand_keep
        self._keys, self._tags, self._flags = keys, tags, flags
        target, result = self._target, self._result
        del target[cand_keep:]
        while result and next(reversed(result)) >= keep:
            result.popitem()
        if state is None:
            return {}
        rows_keep = bisect_left(backend_rows, cand_keep)
        state.truncate(rows_keep)
        self.compared += len(units)
        if len(units):
            if isinstance(state, _NumpyState):
                state.extend(units, self.threshold, self.block_size)
            else:
                state.extend(units, self.threshold)
        new_dups: Any = state.dup_of[rows_keep : len(backend_rows)]
        dup_rows: list[int] = new_dups.tolist() if np is not None else new_dups
        for i in range(cand_keep, len(positions)):
            link = links[i]
            if link >= 0:
                d = dup_rows[link - rows_keep]
                t = -1 if d < 0 else backend_rows[d]
            else:
                c = ~link
                t = c if target[c] < 0 else target[c]
            target.append(t)
            if t >= 0:
                result[positions[i]] = positions[t]
        return dict(result)


def find_near_duplicates(
    vectors: Sequence[Vector] | Any,
    eligible: Sequence[bool],
    threshold: float,
    *,
    backend: Backend = "auto",
    block_size: int = 1024,
) -> dict[int, int]:
    """Which vectors repeat an earlier one: ``{duplicate index: index it repeats}``.

    Index ``i`` is a duplicate when ``cosine(i, j) >= threshold`` for some earlier
    *surviving* index ``j`` (one that is not itself a duplicate); it maps to the
    earliest such ``j``, so the first occurrence survives and a chain of near-copies
    maps to its survivor. Only indices flagged in ``eligible`` take part, and a zero
    vector never duplicates anything. Cosines are compared with a tolerance of
    ``COSINE_TOLERANCE``.

    ``backend="auto"`` uses numpy when it is installed (extra ``numpy``): blocks of
    ``block_size`` vectors are compared to the earlier survivors with matrix products,
    then resolved in order on the small within-block matrix; ``"python"`` is the pure
    Python search, with identical results. ``vectors`` may also be a 2-D numpy array.
    """
    return NearDuplicateFinder(threshold, backend=backend, block_size=block_size).find(
        vectors, eligible
    )
