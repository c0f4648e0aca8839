"""SemanticDedup: drop messages that repeat an earlier one, then enforce the budget.

A message is a near-duplicate when the cosine of its embedding with an earlier
surviving message's is at least ``threshold``; the first occurrence survives. Only
plain messages with text take part: a chunk with tool calls or results, a pinned
message and a message without text are never deduplicated. Embeddings come from an
``EmbeddingCache`` (each distinct text embedded once, with ``embed_batch`` when the
embedder has it) and the search from a ``NearDuplicateFinder`` that reuses its previous
call, so an agent loop that appends a message and packs again embeds and compares only
the new message: convopack embeds and compares every message again on every pack.

Sharing one strategy between conversations is safe: the cache is keyed by the exact
text, the finder by the exact vectors it was given, and the per-chunk flags and vectors
live in each Packer's own table.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Sequence
from itertools import compress
from typing import Any

from ..model import Chunk
from ..packing import Call, ChunkStrategy, ChunkTable, PlanGen
from ..recall import Backend, EmbedderLike, EmbeddingCache, NearDuplicateFinder, Vector
from .summary import check_fallback


def _plain(chunk: Chunk) -> int:
    """1 if the chunk may be deduplicated: one message with text and no tool call or result.

    A message without text (an image, say) has no embedding to compare, so it is never
    a candidate: it neither repeats nor is repeated, and it is never embedded.
    """
    if len(chunk.messages) != 1:
        return 0
    m = chunk.messages[0]
    if m.has_tool_use() or m.has_tool_result():
        return 0
    text = m.text()
    return 1 if text and not text.isspace() else 0


class _Without(ChunkTable):
    """A view of a table with some free chunks taken out (neither free nor sendable).

    It shares every list with the base table (positions are the same, so per-position
    memos stay valid) and asks the base for the nearest chunk that fits, skipping the
    removed ones: no O(history) copy, and a Packer's table keeps its fast searches.
    """

    def __init__(self, base: ChunkTable, gone: set[int]) -> None:
        free = bytearray(base.free)
        for p in gone:
            free[p] = 0
        super().__init__(
            base.messages,
            base.chunks,
            base.cost,
            base.status,
            free,
            base.stubs,
            base.pinned_positions(),
            tokenizer=base.tokenizer,
            unanswered=base.unanswered,
            stubber=base.stubber,
            counts=base.counts,
            reduced=base.reduced,
            turn_only=base.turn_only,
        )
        self.base = base
        self.gone = gone

    def bad_positions(self) -> list[int]:
        return self.base.bad_positions()

    def good_positions(self) -> list[int]:
        gone = self.gone
        return [p for p in self.base.good_positions() if p not in gone]

    def system_positions(self) -> list[int]:
        return self.base.system_positions()

    def memo(self, owner: object) -> list[Any]:
        return self.base.memo(owner)

    def prev_fit(self, j: int, room: int) -> int:
        base, gone = self.base, self.gone
        q = base.prev_fit(j, room)
        while q in gone:
            q = base.prev_fit(q, room)
        return q

    def next_fit(self, j: int, room: int) -> int:
        base, gone = self.base, self.gone
        q = base.next_fit(j, room)
        while q in gone:
            q = base.next_fit(q + 1, room)
        return q


class SemanticDedup(ChunkStrategy):
    """Drop near-duplicate messages (reason ``"duplicate"``), then let ``fallback`` pack.

    ``embedder`` is anything ``EmbeddingCache`` accepts (an object with ``embed`` and
    optionally ``embed_batch`` / ``aembed`` / ``aembed_batch``, a function text ->
    vector) or an ``EmbeddingCache`` to share. ``threshold`` in (0, 1] is the cosine at
    or above which a message repeats an earlier surviving one; only messages that are
    not pinned, carry no tool call or result and have text take part (as duplicates
    and as originals): a message without text (an image) is never embedded. ``fallback``
    (default ``Recency()``) enforces the budget on the rest. ``backend`` picks the
    search (numpy when installed, else pure Python; identical results).

    ``pack_async`` awaits async embedders; ``pack()`` with an async-only embedder
    inside a running event loop raises ``RuntimeError`` saying to use ``pack_async``.
    """

    name = "semantic_dedup"

    def __init__(
        self,
        embedder: EmbedderLike | EmbeddingCache,
        *,
        threshold: float = 0.95,
        fallback: object = None,
        backend: Backend = "auto",
    ) -> None:
        self._finder = NearDuplicateFinder(threshold, backend=backend)  # validates both
        self.threshold = float(threshold)
        self.backend: Backend = backend
        self.cache = embedder if isinstance(embedder, EmbeddingCache) else EmbeddingCache(embedder)
        self.embedder = self.cache.embedder
        self.fallback = check_fallback(fallback)
        self._lock = threading.Lock()
        self._vectors_owner = object()  # a second per-position memo in the table

    def _find(self, vectors: Sequence[Vector]) -> dict[int, int]:
        """``{candidate: earlier surviving candidate it repeats}``."""
        flags = [True] * len(vectors)
        if self._lock.acquire(blocking=False):
            try:
                return self._finder.find(vectors, flags)
            finally:
                self._lock.release()
        # Another thread is using the shared finder: search afresh instead of waiting.
        return NearDuplicateFinder(self.threshold, backend=self.backend).find(vectors, flags)

    def plan(self, table: ChunkTable, budget: int) -> PlanGen:
        chunks = table.chunks
        n = len(chunks)
        # Per position, kept across a Packer's calls: 1 for a plain chunk (one message,
        # no tool call or result), and its vector. Plain chunks are embedded when first
        # seen, pinned or not, so a pack only looks at the chunks that are new.
        plain = table.memo(self)
        vecs = table.memo(self._vectors_owner)
        del vecs[len(plain) :], plain[len(vecs) :]
        start = len(plain)
        if start < n:
            flags = [_plain(chunks[p]) for p in range(start, n)]
            todo = [chunks[p].messages[0] for p in compress(range(start, n), flags)]
            got: Sequence[Vector] = []
            if todo:
                got = yield Call(self.cache.vectors, (todo,), afn=self.cache.avectors)
            it = iter(got)
            plain.extend(flags)
            vecs.extend([next(it) if f else None for f in flags])
        mask = list(map(operator.and_, plain, table.free))
        cands = list(compress(range(n), mask))
        dups = self._find(list(compress(vecs, mask))) if cands else {}
        if not dups:
            sel = yield from self.fallback.plan(table, budget)
            return sel
        gone = {cands[k] for k in dups}
        sel = yield from self.fallback.plan(_Without(table, gone), budget)
        notes = sel.notes
        for p in sorted(gone):
            for i in chunks[p].indices:
                notes.setdefault(i, "duplicate")
        return sel

    def __repr__(self) -> str:
        return (
            f"SemanticDedup({self.embedder!r}, threshold={self.threshold!r}, "
            f"fallback={self.fallback!r})"
        )
