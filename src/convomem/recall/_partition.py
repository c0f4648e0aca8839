"""One user's recall items in memory, for the embedded (SQLite) backend: a float32 matrix
of the items' unit key vectors (``recall.keys``: one or more an item; an item scores its
best key) and an inverted index of the texts' words, searched exactly with numpy.

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
import re
import threading
import unicodedata
from array import array
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from ._keyvecs import KeyVectors, Snapshot, similarities
from .fusion import _WORD, K1, VECTOR_TOLERANCE, B, query_terms

_END: Final = "\x00"
_WORD_OR_END: Final = re.compile(_WORD.pattern + "|\x00")


def fold(word: str) -> str:
    """``word`` lowercased with its diacritics removed (and no NUL: it ends texts)."""
    word = word.lower()
    if _END in word:
        word = word.replace(_END, " ")
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


_ASCII_SPLIT: Final = {c: " " for c in range(128) if not chr(c).isalnum() and chr(c) != _END} | {
    ord(_END): " \x00 "
}


def split_words(texts: Sequence[str]) -> list[str]:
    """The folded words of ``texts``, each text's followed by ``_END``. ASCII runs are
    split by ``str.translate`` + ``str.split`` (2-3x faster than the regex, same words:
    in ASCII a word character is a letter or a digit)."""
    out: list[str] = []
    for i in range(0, len(texts), 2048):
        joined = _END.join(map(fold, texts[i : i + 2048])) + _END
        if joined.isascii():
            out += joined.translate(_ASCII_SPLIT).split()
        else:
            out += _WORD_OR_END.findall(joined)
    return out


def search_terms(terms: Sequence[str]) -> list[str]:
    """The distinct folded words of a query's terms, in order."""
    out: dict[str, None] = {}
    for t in terms:
        for w in query_terms(fold(t)):
            out.setdefault(w, None)
    return list(out)


def length_norm(dl: Any, avgdl: float) -> Any:
    """BM25's length normalization of documents of ``dl`` words."""
    return K1 * (1.0 - B + B * dl / avgdl)


def bm25_term(idf: float, tf: Any, norm: Any) -> Any:
    """One term's BM25 contribution (numpy arrays or floats: the same operations in the
    same order, so an oracle in plain Python gets bit-identical scores)."""
    return idf * (tf * (K1 + 1.0)) / (tf + norm)


def idf_of(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class View(NamedTuple):
    """The rows ``[0, n)`` of a partition, as one search sees them."""

    n: int
    vecs: Snapshot  # the rows' key vectors
    rids: Any
    created: Any
    kinds: Any
    norms: Any  # length_norm of each row, for this n
    kind_codes: dict[str, int]


class Partition:
    """One user's items in memory (see the module docstring)."""

    def __init__(self, np: Any, dim: int) -> None:
        self.np = np
        self.lock = threading.Lock()
        self.n = 0
        self.top = 0  # the largest rid loaded
        self.added = self.removed = -1  # the user's counters this partition reflects
        self.vecs = KeyVectors(np, dim)
        self.rids = np.empty(16, dtype=np.int64)
        self.created = np.empty(16, dtype=np.float64)
        self.kinds = np.empty(16, dtype=np.int32)
        self.lengths = np.empty(16, dtype=np.float64)
        self.total_length = 0
        self._norms: tuple[int, Any] = (-1, None)  # (n, length_norm of rows [0, n))
        self.kind_codes: dict[str, int] = {}
        self.postings: dict[str, tuple[array[int], array[int]]] = {}
        self.postings_count = 0

    @property
    def dim(self) -> int:
        return self.vecs.dim

    def nbytes(self) -> int:
        """About how much memory the partition holds."""
        return int(self.vecs.nbytes() + 28 * len(self.rids) + 16 * self.postings_count)

    def _grow(self, need: int) -> None:
        np = self.np
        if need <= len(self.rids):
            return
        size = max(need, 2 * len(self.rids))
        for name in ("rids", "created", "kinds", "lengths"):
            old = getattr(self, name)
            new = np.empty(size, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def extend(self, rows: Sequence[Any], added: int, removed: int) -> None:
        """Append ``(rid, kind, created_at, text, vec)`` rows (those newer than what is
        loaded: another thread may have loaded some), and note the counters read."""
        with self.lock:
            fresh = [r for r in rows if r[0] > self.top]
            start, end = self.n, self.n + len(fresh)
            self._grow(end)
            if fresh:
                self.vecs.append([r[4] for r in fresh], start)
                self.rids[start:end] = [r[0] for r in fresh]
                self.created[start:end] = [r[2] for r in fresh]
                codes = self.kind_codes
                self.kinds[start:end] = [codes.setdefault(r[1], len(codes)) for r in fresh]
                self._index_words([r[3] for r in fresh], start)
                self.top = int(self.rids[end - 1])
                self.n = end
            if (added, removed) > (self.added, self.removed):
                self.added, self.removed = added, removed

    def _index_words(self, texts: Sequence[str], start: int) -> None:
        """Add the texts (rows ``start`` on) to the inverted index. The batch is split
        into words by one regex pass over all texts (a separator ends each text) and
        counted with numpy: the Python work is per distinct word, not per word."""
        np = self.np
        toks = split_words(texts)
        ids = {w: i for i, w in enumerate(dict.fromkeys(toks))}
        shift = (start + len(texts)).bit_length()
        if len(ids) >= 1 << (62 - shift) and len(texts) > 1:  # keys would overflow int64
            half = len(texts) // 2
            self._index_words(texts[:half], start)
            self._index_words(texts[half:], start + half)
            return
        tok = np.fromiter(map(ids.__getitem__, toks), dtype=np.int64, count=len(toks))
        end = tok == ids[_END]
        row = np.cumsum(end) - end + start  # a text's words, then its separator
        word = ~end
        lengths = np.bincount(row[word] - start, minlength=len(texts))
        self.lengths[start : start + len(texts)] = lengths
        self.total_length += int(lengths.sum())
        if not word.any():
            return
        # one key per (word, row), sorted: runs of a key are a word's count in a row
        keys, counts = np.unique((tok[word] << shift) + row[word], return_counts=True)
        word_of, row_of = keys >> shift, keys & ((1 << shift) - 1)
        self.postings_count += len(keys)
        bounds = np.flatnonzero(np.diff(word_of)) + 1
        starts = [0, *bounds.tolist()]
        ends = [*bounds.tolist(), len(keys)]
        names = list(ids)
        postings = self.postings
        for a, z in zip(starts, ends, strict=True):
            name = names[int(word_of[a])]
            entry = postings.get(name)
            if entry is None:
                entry = postings[name] = (array("q"), array("q"))
            entry[0].frombytes(row_of[a:z].tobytes())
            entry[1].frombytes(counts[a:z].astype(np.int64).tobytes())

    def view(self, terms: Sequence[str] = ()) -> tuple[View, list[tuple[Any, Any]]]:
        """A consistent view of the rows loaded now, and copies of ``terms``' postings."""
        np = self.np
        with self.lock:
            norms = None
            if terms and self.n:
                if self._norms[0] != self.n:
                    avgdl = self.total_length / self.n
                    self._norms = (self.n, length_norm(self.lengths[: self.n], avgdl))
                norms = self._norms[1]
            view = View(
                self.n,
                self.vecs.snapshot(),
                self.rids,
                self.created,
                self.kinds,
                norms,
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
    v, lists = part.view(search_terms(terms))
    if not v.n or not lists:
        return []
    idfs = [idf_of(v.n, len(p)) for p, _ in lists]
    mask = mask_of(np, v, kinds, as_of)
    found = _max_score(np, v, lists, idfs, n, mask)
    if found is not None:
        pos, scores = found
    elif len(lists) == 1:
        pos, tf = lists[0]  # one word: its rows, in order
        scores = bm25_term(idfs[0], tf.astype(np.float64), v.norms[pos])
    else:
        dense = np.zeros(v.n)
        for (p, tf), idf in zip(lists, idfs, strict=True):
            dense[p] += bm25_term(idf, tf.astype(np.float64), v.norms[p])
        pos = np.flatnonzero(dense)  # every contribution is positive
        scores = dense[pos]
    if found is None and mask is not None:
        keep = mask[pos]
        pos, scores = pos[keep], scores[keep]
    return best(np, v, pos, scores, n)


def _max_score(
    np: Any, v: View, lists: list[tuple[Any, Any]], idfs: list[float], n: int, mask: Any
) -> tuple[Any, Any] | None:
    """Rows sure to hold the ``n`` best, and their scores, found without scoring every
    row a common word matches (MaxScore): score the rows of the rarest words fully; a
    row with none of them has only the other words, so scores less than the sum of
    their bounds (``idf * (K1 + 1)``); when that sum is at most the ``n``-th best score
    found, no such row can enter. None: score every matching row instead."""
    if len(lists) < 2:
        return None
    order = sorted(range(len(lists)), key=lambda i: len(lists[i][0]))
    # the rarest words whose rows are few next to the rows all the words match
    budget = sum(len(p) for p, _ in lists) // 16
    j, size = 0, 0
    while j < len(order) - 1 and size + len(lists[order[j]][0]) <= budget:
        size += len(lists[order[j]][0])
        j += 1
    if not j:
        return None
    rest = sum(idfs[i] for i in order[j:]) * (K1 + 1.0)
    rows = [lists[i][0] for i in order[:j]]
    if j == 1:
        d = rows[0]
    else:
        seen = np.zeros(v.n, dtype=bool)
        for r in rows:
            seen[r] = True
        d = np.flatnonzero(seen)
    if mask is not None:
        d = d[mask[d]]
    if len(d) < n:
        return None
    scores = np.zeros(len(d))
    for (p, tf), idf in zip(lists, idfs, strict=True):  # query order: the same sums
        at = np.minimum(np.searchsorted(p, d), len(p) - 1)
        hit = p[at] == d
        scores[hit] += bm25_term(idf, tf[at[hit]].astype(np.float64), v.norms[d[hit]])
    nth = scores[np.argpartition(-scores, n - 1)[n - 1]]
    if rest * (1.0 + 1e-9) <= nth:
        return d, scores
    return None


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
    sims = similarities(np, v.vecs, v.n, query)
    mask = mask_of(np, v, kinds, as_of)
    if mask is not None:
        sims[~mask] = -np.inf
    if v.n > n:  # only what reaches the n-th best goes on (ties included)
        floor = max(sims[np.argpartition(-sims, n - 1)[n - 1]], VECTOR_TOLERANCE)
        pos = np.flatnonzero(sims >= floor)
    else:
        pos = np.arange(v.n)
    pos = pos[sims[pos] > VECTOR_TOLERANCE]  # float32 noise around an orthogonal vector
    return best(np, v, pos, sims[pos].astype(np.float64), n)
