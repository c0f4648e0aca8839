"""``RecallBacklog``: appended messages the service could not index for recall yet.

An append stores its messages first and indexes them for recall after; a failure there
(the embedder down, slow or rate-limited, the index's database unavailable:
``recall.guarded.OUTAGES``) must not fail the append. The messages wait here instead,
and the next append whose own messages index fine indexes them too (``drain``), oldest
first, at most ``per_drain`` messages a request so no request pays for a long outage.

- **Bounded**: at most ``limit`` messages wait; beyond, the oldest batches are dropped
  (``dropped`` counts them: they are in the log, recall misses them).
- **Nothing erased comes back**: a batch is indexed only while its session still exists
  (``exists``, asked just before), and ``forget`` drops a deleted session's or an erased
  user's batches at once.
- **Per process, in memory**: a process that stops forgets its backlog (the messages
  stay in the log; recall misses them). Indexing is idempotent (an indexed id is
  skipped), so two requests draining the same batch do no harm.

Appended messages are indexed with the seqs the log gave them (``with_seqs``), so a hit
on one of them brings its neighbouring turns (``RecallIndex.search(neighbours=)``); a
batch keeps its seqs while it waits.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _check
from ..model import Message
from ..recall.guarded import OUTAGES

__all__ = ["RecallBacklog", "with_seqs"]

Batch = tuple[list[Message], list[int] | None]
"""Messages to index and their seqs (None: not known)."""


async def with_seqs(store: Any, messages: Sequence[Message], after: int) -> list[Batch]:
    """``messages`` (just appended to ``store``'s session, whose newest seq was ``after``
    before) as batches to index: those the log holds above ``after``, with their seqs,
    read newest first (O(messages appended since)); the others (a replay of messages
    stored before) without. An outage while reading gives them all without."""
    want = {m.id for m in messages}
    seqs: dict[str, int] = {}
    cursor: str | None = None
    try:
        while len(seqs) < len(want):
            page, cursor = await store.entries(cursor, min(len(want), 500), newest_first=True)
            fresh = [e for e in page if e.seq > after]
            seqs.update((e.message.id, e.seq) for e in fresh if e.message.id in want)
            if cursor is None or len(fresh) < len(page):
                break
    except OUTAGES:
        seqs = {}
    known = [m for m in messages if m.id in seqs]
    rest = [m for m in messages if m.id not in seqs]
    out: list[Batch] = [(known, [seqs[m.id] for m in known])] if known else []
    return out + ([(rest, None)] if rest else [])


@dataclass(eq=False, slots=True)
class _Batch:
    tenant: str | None
    user_id: str
    session_id: str
    messages: list[Message]
    seqs: list[int] | None


class RecallBacklog:
    """Messages waiting to be indexed (see the module docstring)."""

    def __init__(self, limit: int = 10_000, per_drain: int = 256) -> None:
        self.limit = _check.positive_int("limit", limit)
        self.per_drain = _check.positive_int("per_drain", per_drain)
        self._batches: deque[_Batch] = deque()
        self._size = 0
        self.dropped = 0
        """Messages dropped because the backlog was full."""

    def __len__(self) -> int:
        """Messages waiting."""
        return self._size

    def put(
        self,
        tenant: str | None,
        user_id: str,
        session_id: str,
        messages: Sequence[Message],
        seqs: Sequence[int] | None = None,
    ) -> None:
        """Keep ``messages`` of ``session_id`` (with their ``seqs``, when known) to index
        later (the oldest dropped when full)."""
        if not messages:
            return
        kept = None if seqs is None else list(seqs)
        self._batches.append(_Batch(tenant, user_id, session_id, list(messages), kept))
        self._size += len(messages)
        while self._size > self.limit:
            gone = self._batches.popleft()
            self._size -= len(gone.messages)
            self.dropped += len(gone.messages)

    def forget(
        self, tenant: str | None, *, session_id: str | None = None, user_id: str | None = None
    ) -> int:
        """Drop the batches of ``session_id`` or of ``user_id`` in ``tenant``; how many
        messages."""
        keep: deque[_Batch] = deque()
        n = 0
        for b in self._batches:
            if b.tenant == tenant and (
                (session_id is not None and b.session_id == session_id)
                or (user_id is not None and b.user_id == user_id)
            ):
                n += len(b.messages)
            else:
                keep.append(b)
        self._batches, self._size = keep, self._size - n
        return n

    def _remove(self, batch: _Batch) -> None:
        if batch in self._batches:  # identity (eq=False); another drain may have taken it
            self._batches.remove(batch)
            self._size -= len(batch.messages)

    async def drain(self, index: Any, exists: Callable[[str | None, str], Awaitable[bool]]) -> int:
        """Index waiting batches, oldest first, up to ``per_drain`` messages; how many
        were handed to the index. A failure of ``index.add`` propagates and leaves its
        batch first in line."""
        done = 0
        while self._batches and done < self.per_drain:
            batch = self._batches[0]
            if await exists(batch.tenant, batch.session_id):
                await index.add(
                    batch.messages,
                    user_id=batch.user_id,
                    session_id=batch.session_id,
                    tenant=batch.tenant,
                    seqs=batch.seqs,
                )
                done += len(batch.messages)
            self._remove(batch)
        return done
