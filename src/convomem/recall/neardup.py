"""Exact near-duplicate search over embedding vectors, reusing the previous call's work.

``NearDuplicateFinder`` keys everything by the exact float64 bytes of the vectors it is
given, so sharing one between conversations is safe: a call only reuses work for a
leading run of vectors equal to the previous call's. The similarity arithmetic lives in
``_search``.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, Final, cast

from .. import _check
from ..errors import ConfigError, EmbeddingError
from ._search import NumpyState, PythonState, unit_rows
from .cache import _as_vector, _short
from .embedders import Backend, Vector, _resolve_backend


def _check_options(threshold: object, backend: object, block_size: object) -> Any:
    """Validate the search options; return the numpy module to use, or None."""
    _check.fraction("threshold", threshold, low_open=True)
    _check.positive_int("block_size", block_size)
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

    An empty vector (what ``EmbeddingCache`` gives a text-less message before it knows
    the dimension) is a zero vector of no particular length: no key, never a candidate,
    and not held to the others' dimension. A tag is the vector object itself when it is
    immutable (a bytes-backed float64 memoryview, as EmbeddingCache returns) or
    ineligible, else a sentinel. ``prev``
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
        if not mat.shape[1] or not any(flags):
            return [None] * n, [_UNTRUSTED] * n, None
        keys: list[bytes | None] = [mat[i].tobytes() if f else None for i, f in enumerate(flags)]
        return keys, [_UNTRUSTED] * n, mat.shape[1]
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
        if not key:
            continue  # an empty vector: a zero vector, never a candidate
        if dim is None:
            dim, first = len(key) // 8, i
        elif len(key) != 8 * dim:
            raise EmbeddingError(
                f"vectors[{i}]: has {len(key) // 8} numbers; vectors[{first}] has {dim}"
            )
        keys[i] = key
    return keys, tags, dim


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
        self._state: NumpyState | PythonState | None = None

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
        new_pos = [i for i in range(keep, n) if keys[i] is not None]
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
        nonzero, units = unit_rows(np, keys, distinct)
        # Commit.
        if fresh:
            self.reset()
            cand_keep = 0
            state = None if dim is None else NumpyState(np, dim) if np else PythonState(dim)
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
            if isinstance(state, NumpyState):
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
    vector (an empty one included, of any length) never duplicates anything. Cosines
    are compared with a tolerance of ``COSINE_TOLERANCE``.

    ``backend="auto"`` uses numpy when it is installed (extra ``numpy``): blocks of
    ``block_size`` vectors are compared to the earlier survivors with matrix products,
    then resolved in order on the small within-block matrix; ``"python"`` is the pure
    Python search, with identical results. ``vectors`` may also be a 2-D numpy array.
    """
    return NearDuplicateFinder(threshold, backend=backend, block_size=block_size).find(
        vectors, eligible
    )
