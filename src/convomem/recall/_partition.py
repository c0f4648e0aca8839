"""One user's recall items in memory, for the embedded (SQLite) backend: a float32 matrix
of the items' unit key vectors (``recall.keys``: one or more an item; an item scores its
best key) and an inverted index of the texts' terms, searched exactly with numpy.

Why in memory: an exact vector search must read every vector of the user anyway, and
FTS5's ``bm25()`` costs about 2 us per matching row and cannot stop early (``ORDER BY
rank LIMIT n`` scores every match), so a query with a common word scored tens of
thousands of rows (50-180 ms at 10^5 items). Here a query term costs a few numpy
operations over its posting list.

Lexical relevance is BM25F (``K1``, ``B``; the non-negative IDF
``ln(1 + (N - df + 0.5) / (df + 0.5))``) with statistics of the user's own items only,
so no other user's texts shape a user's scores. Terms are ``analyze.terms`` (folded, stop
words out, English stems). An item's document is its own text plus, at lower weights,
the texts of its neighbours in its session (``PREV_WEIGHT`` the item before,
``NEXT_WEIGHT`` the one after): in a conversation the answer's words are often in the
question it answers ("What did you take from the book?" / "Self-acceptance."). The
neighbours are the items indexed just before and after in the same session (in seq
order when seqs are given), linked as rows arrive (``prev``/``nxt``), and the weighted
term frequencies are summed at query time from the terms' own postings, so an item that
gains a neighbour later is scored with it at once and the postings only grow.

A partition only grows in place (rows past ``n`` are written before ``n`` moves, under
``lock``); a removal makes the backend build a new one. A search takes a consistent view
(``view()``) and never sees rows added after it.
"""

from __future__ import annotations

import math
import re
import threading
from array import array
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from ._keyvecs import KeyVectors, Snapshot, similarities
from .analyze import analyze_words, fold
from .fusion import _WORD, K1, NEXT_WEIGHT, PREV_WEIGHT, VECTOR_TOLERANCE, B

_END: Final = "\x00"
_WORD_OR_END: Final = re.compile(_WORD.pattern + "|\x00")

_ASCII_SPLIT: Final = bytes(
    c if chr(c).isalnum() or c == 0 else 32 for c in range(256)
)  # bytes.translate: letters, digits and the NUL that ends a text stay; the rest is a space
_SEP: Final = f" {_END} "


def split_words(texts: Sequence[str]) -> list[str]:
    """The folded words of ``texts``, each text's followed by ``_END``. ASCII runs are
    split by ``bytes.translate`` + ``split`` (several times faster than the regex, same
    words: in ASCII a word character is a letter or a digit)."""
    out: list[str] = []
    for i in range(0, len(texts), 2048):
        joined = _SEP.join(fold(t).replace(_END, " ") for t in texts[i : i + 2048]) + _SEP
        if joined.isascii():
            out += joined.encode("ascii").translate(_ASCII_SPLIT).decode("ascii").split()
        else:
            out += _WORD_OR_END.findall(joined)
    return out


def split_terms(texts: Sequence[str]) -> list[str]:
    """``split_words`` with each word replaced by its term and stop words left out (the
    analyzer runs once per distinct word)."""
    toks = split_words(texts)
    terms = analyze_words(set(toks) - {_END})
    terms[_END] = _END
    return [t for t in map(terms.__getitem__, toks) if t is not None]


def length_norm(dl: Any, avgdl: float) -> Any:
    """BM25's length normalization of documents of ``dl`` (weighted) terms."""
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
    norms: Any  # length_norm of each row's document, for this n
    kind_codes: dict[str, int]
    prev: Any  # the row before each row in its session, or -1
    nxt: Any  # the row after (only those < n count), or -1


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
        self.prev = np.empty(16, dtype=np.int64)
        self.nxt = np.empty(16, dtype=np.int64)
        self.last: dict[str, tuple[int, int | None]] = {}  # session -> its last (row, seq)
        self._norms: tuple[int, Any] = (-1, None)  # (n, length_norm of rows [0, n))
        self.kind_codes: dict[str, int] = {}
        self.postings: dict[str, tuple[array[int], array[int]]] = {}
        self.postings_count = 0

    @property
    def dim(self) -> int:
        return self.vecs.dim

    def nbytes(self) -> int:
        """About how much memory the partition holds."""
        return int(self.vecs.nbytes() + 44 * len(self.rids) + 16 * self.postings_count)

    def grow(self, need: int) -> None:
        np = self.np
        if need <= len(self.rids):
            return
        size = max(need, 2 * len(self.rids))
        for name in ("rids", "created", "kinds", "lengths", "prev", "nxt"):
            old = getattr(self, name)
            new = np.empty(size, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def extend(self, rows: Sequence[Any], added: int, removed: int) -> None:
        """Append ``(rid, kind, created_at, text, vec, session_id, seq)`` rows (those newer
        than what is loaded: another thread may have loaded some), link each to the row
        before it in its session, and note the counters read."""
        with self.lock:
            fresh = [r for r in rows if r[0] > self.top]
            start, end = self.n, self.n + len(fresh)
            self.grow(end)
            if fresh:
                self.vecs.append([r[4] for r in fresh], start)
                self.rids[start:end] = [r[0] for r in fresh]
                self.created[start:end] = [r[2] for r in fresh]
                codes = self.kind_codes
                self.kinds[start:end] = [codes.setdefault(r[1], len(codes)) for r in fresh]
                self._index_words([r[3] for r in fresh], start)
                self._link(fresh, start)
                self.top = int(self.rids[end - 1])
                self.n = end
            if (added, removed) > (self.added, self.removed):
                self.added, self.removed = added, removed

    def _link(self, rows: Sequence[Any], start: int) -> None:
        """Each new row's neighbours: the session's last row before it (by seq when both
        have one; a row that comes out of seq order gets no neighbour)."""
        prev, nxt, last = self.prev, self.nxt, self.last
        nxt[start : start + len(rows)] = -1
        for i, r in enumerate(rows, start):
            sid, seq = r[5], r[6]
            before = last.get(sid)
            prev[i] = -1
            if before is not None and (seq is None or before[1] is None or seq > before[1]):
                prev[i] = before[0]
                nxt[before[0]] = i
            if before is None or prev[i] >= 0:
                last[sid] = (i, seq)

    def _index_words(self, texts: Sequence[str], start: int) -> None:
        """Add the texts (rows ``start`` on) to the inverted index. The batch is split
        into terms by one pass over all texts (a separator ends each text) and counted
        with numpy: the Python work is per distinct word, not per word."""
        np = self.np
        toks = split_terms(texts)
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

    def _doc_norms(self) -> Any:
        """``length_norm`` of each row's document (its own terms, its neighbours' at their
        weights), for the rows loaded now (under ``lock``)."""
        np, n = self.np, self.n
        own = self.lengths[:n]
        dl = own.copy()
        prev, nxt = self.prev[:n], self.nxt[:n]
        has = prev >= 0
        dl[has] += PREV_WEIGHT * own[prev[has]]
        has = (nxt >= 0) & (nxt < n)
        dl[has] += NEXT_WEIGHT * own[nxt[has]]
        return length_norm(dl, max(float(dl.sum()) / n, 1e-9)) if n else np.empty(0)

    def view(self, terms: Sequence[str] = ()) -> tuple[View, list[tuple[Any, Any]]]:
        """A consistent view of the rows loaded now, and copies of ``terms``' postings."""
        np = self.np
        with self.lock:
            norms = None
            if terms and self.n:
                if self._norms[0] != self.n:
                    self._norms = (self.n, self._doc_norms())
                norms = self._norms[1]
            view = View(
                self.n,
                self.vecs.snapshot(),
                self.rids,
                self.created,
                self.kinds,
                norms,
                dict(self.kind_codes),
                self.prev,
                self.nxt,
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


def term_frequencies(np: Any, v: View, rows: Any, tf: Any) -> Any:
    """A term's weighted frequency in every row's document (a dense array of ``v.n``):
    its own count, plus ``PREV_WEIGHT`` of it in the row after each row that has it and
    ``NEXT_WEIGHT`` of it in the row before."""
    acc = np.zeros(v.n)
    own = tf.astype(np.float64)
    acc[rows] += own
    after = v.nxt[rows]
    ok = (after >= 0) & (after < v.n)
    acc[after[ok]] += PREV_WEIGHT * own[ok]  # each row has one row before: no repeats
    before = v.prev[rows]
    ok = before >= 0
    acc[before[ok]] += NEXT_WEIGHT * own[ok]
    return acc


def lexical(
    np: Any,
    part: Partition,
    terms: Sequence[str],
    n: int,
    kinds: Sequence[str] | None,
    as_of: float | None,
) -> list[tuple[int, float]]:
    """The ``n`` best ``(rid, BM25F)`` of the partition for the query's terms."""
    v, lists = part.view(list(dict.fromkeys(terms)))
    if not v.n or not lists:
        return []
    dense = np.zeros(v.n)
    for rows, tf in lists:  # query order: the same sums as an oracle's
        acc = term_frequencies(np, v, rows, tf)
        pos = np.flatnonzero(acc)
        dense[pos] += bm25_term(idf_of(v.n, len(pos)), acc[pos], v.norms[pos])
    pos = np.flatnonzero(dense)  # every contribution is positive
    mask = mask_of(np, v, kinds, as_of)
    if mask is not None:
        pos = pos[mask[pos]]
    return best(np, v, pos, dense[pos], n)


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
