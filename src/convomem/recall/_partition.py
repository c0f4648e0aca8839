"""One user's recall items in memory, for the embedded (SQLite) backend: a float32 matrix
of unit vectors and an inverted index of the texts' words, searched exactly with numpy.

Why in memory: an exact vector search must read every vector of the user anyway, and
FTS5's ``bm25()`` costs about 2 us per matching row and cannot stop early (``ORDER BY
rank LIMIT n`` scores every match), so a query with a common word scored tens of
thousands of rows (50-180 ms at 10^5 items). Here a query term costs a few numpy
operations over its posting list.

Lexical relevance is Okapi BM25 (``K1``, ``B``; the non-negative IDF
``ln(1 + (N - df + 0.5) / (df + 0.5))``) with statistics of the user's own items only,
so no other user's texts shape a user's scores. Words are ``fusion.query_terms``'s
(letters and digits, lowercased) after diacritics are folded (``café`` = ``cafe``).

A partition only grows in place (rows past ``n`` are written before ``n`` moves, under
``lock``); a removal makes the backend build a new one. A search takes a consistent view
(``view()``) and never sees rows added after it.
"""

from __future__ import annotations

import math
import threading
import unicodedata
from array import array
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from .fusion import _WORD, VECTOR_TOLERANCE, query_terms

K1: Final = 1.2
B: Final = 0.75


def fold(word: str) -> str:
    """``word`` lowercased with its diacritics removed."""
    word = word.lower()
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def words(text: str) -> list[str]:
    """The words of an item's text, in order, repeated ones included."""
    return _WORD.findall(fold(text))


def search_terms(terms: Sequence[str]) -> list[str]:
    """The distinct folded words of a query's terms, in order."""
    out: dict[str, None] = {}
    for t in terms:
        for w in query_terms(fold(t)):
            out.setdefault(w, None)
    return list(out)


def bm25_term(idf: float, tf: Any, dl: Any, avgdl: float) -> Any:
    """One term's BM25 contribution (numpy arrays or floats: the same operations in the
    same order, so an oracle in plain Python gets bit-identical scores)."""
    return idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * dl / avgdl))


def idf_of(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class View(NamedTuple):
    """The rows ``[0, n)`` of a partition, as one search sees them."""

    n: int
    mat: Any
    rids: Any
    created: Any
    kinds: Any
    lengths: Any
    total_length: int
    kind_codes: dict[str, int]


class Partition:
    """One user's items in memory (see the module docstring)."""

    def __init__(self, np: Any, dim: int) -> None:
        self.np = np
        self.lock = threading.Lock()
        self.n = 0
        self.top = 0  # the largest rid loaded
        self.added = self.removed = -1  # the user's counters this partition reflects
        self.mat = np.empty((16, dim), dtype=np.float32)
        self.rids = np.empty(16, dtype=np.int64)
        self.created = np.empty(16, dtype=np.float64)
        self.kinds = np.empty(16, dtype=np.int32)
        self.lengths = np.empty(16, dtype=np.float64)
        self.total_length = 0
        self.kind_codes: dict[str, int] = {}
        self.postings: dict[str, tuple[array[int], array[int]]] = {}

    @property
    def dim(self) -> int:
        return int(self.mat.shape[1])

    def nbytes(self) -> int:
        """About how much memory the partition holds."""
        postings = sum(len(p) for p, _ in self.postings.values())
        return int(self.mat.nbytes + 28 * self.mat.shape[0] + 16 * postings)

    def _grow(self, need: int) -> None:
        np = self.np
        if need <= self.mat.shape[0]:
            return
        size = max(need, 2 * self.mat.shape[0])
        for name in ("mat", "rids", "created", "kinds", "lengths"):
            old = getattr(self, name)
            new = np.empty((size, *old.shape[1:]), dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def extend(self, rows: Sequence[Any], added: int, removed: int) -> None:
        """Append ``(rid, kind, created_at, text, vec)`` rows (those newer than what is
        loaded: another thread may have loaded some), and note the counters read."""
        np = self.np
        with self.lock:
            fresh = [r for r in rows if r[0] > self.top]
            start, end = self.n, self.n + len(fresh)
            self._grow(end)
            if fresh:
                blob = b"".join(r[4] for r in fresh)
                self.mat[start:end] = np.frombuffer(blob, dtype=np.float32).reshape(end - start, -1)
                self.rids[start:end] = [r[0] for r in fresh]
                self.created[start:end] = [r[2] for r in fresh]
                codes = self.kind_codes
                self.kinds[start:end] = [codes.setdefault(r[1], len(codes)) for r in fresh]
                postings = self.postings
                for pos, r in enumerate(fresh, start):
                    toks = words(r[3])
                    self.lengths[pos] = len(toks)
                    self.total_length += len(toks)
                    for word, count in Counter(toks).items():
                        entry = postings.get(word)
                        if entry is None:
                            entry = postings[word] = (array("q"), array("q"))
                        entry[0].append(pos)
                        entry[1].append(count)
                self.top = int(self.rids[end - 1])
                self.n = end
            if (added, removed) > (self.added, self.removed):
                self.added, self.removed = added, removed

    def view(self, terms: Sequence[str] = ()) -> tuple[View, list[tuple[Any, Any]]]:
        """A consistent view of the rows loaded now, and copies of ``terms``' postings."""
        np = self.np
        with self.lock:
            view = View(
                self.n,
                self.mat,
                self.rids,
                self.created,
                self.kinds,
                self.lengths,
                self.total_length,
                dict(self.kind_codes),
            )
            lists = []
            for t in terms:
                entry = self.postings.get(t)
                if entry is not None:
                    lists.append((np.array(entry[0], dtype=np.int64), np.array(entry[1])))
        return view, lists


def mask_of(np: Any, v: View, kinds: Sequence[str] | None, as_of: float | None) -> Any:
    """Which of the view's rows pass the filters (None: all)."""
    mask = None
    if kinds is not None:
        codes = [v.kind_codes[k] for k in kinds if k in v.kind_codes]
        mask = np.isin(v.kinds[: v.n], codes)
    if as_of is not None:
        when = v.created[: v.n] <= as_of
        mask = when if mask is None else mask & when
    return mask


def best(np: Any, v: View, pos: Any, scores: Any, n: int) -> list[tuple[int, float]]:
    """The ``n`` best ``(rid, score)`` among rows ``pos`` (ties: the newer row first)."""
    if len(pos) > n:
        # everything scoring at least the n-th best survives the cut, ties included
        cut = scores[np.argpartition(-scores, n - 1)[n - 1]]
        keep = scores >= cut
        pos, scores = pos[keep], scores[keep]
    order = np.lexsort((-pos, -scores))[:n]
    return list(zip(v.rids[pos[order]].tolist(), scores[order].tolist(), strict=True))


def lexical(
    np: Any,
    part: Partition,
    terms: Sequence[str],
    n: int,
    kinds: Sequence[str] | None,
    as_of: float | None,
) -> list[tuple[int, float]]:
    """The ``n`` best ``(rid, BM25)`` of the partition for the query's terms."""
    words_ = search_terms(terms)
    v, lists = part.view(words_)
    if not v.n or not lists:
        return []
    avgdl = v.total_length / v.n
    scores = np.zeros(v.n)
    matched = np.zeros(v.n, dtype=bool)
    for pos, tf in lists:
        idf = idf_of(v.n, len(pos))
        scores[pos] += bm25_term(idf, tf.astype(np.float64), v.lengths[pos], avgdl)
        matched[pos] = True
    mask = mask_of(np, v, kinds, as_of)
    if mask is not None:
        matched &= mask
    pos = np.flatnonzero(matched)
    return best(np, v, pos, scores[pos], n)


def vector(
    np: Any,
    part: Partition,
    query: Any,
    n: int,
    kinds: Sequence[str] | None,
    as_of: float | None,
) -> list[tuple[int, float]]:
    """The ``n`` best ``(rid, cosine)`` of the partition for a unit query vector."""
    v, _ = part.view()
    if not v.n:
        return []
    sims = v.mat[: v.n] @ query
    keep = sims > VECTOR_TOLERANCE  # float32 noise around an orthogonal vector
    mask = mask_of(np, v, kinds, as_of)
    if mask is not None:
        keep &= mask
    pos = np.flatnonzero(keep)
    return best(np, v, pos, sims[pos].astype(np.float64), n)
