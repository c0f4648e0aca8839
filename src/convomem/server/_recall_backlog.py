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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _check
from ..model import Message

__all__ = ["RecallBacklog"]


@dataclass(eq=False, slots=True)
class _Batch:
    tenant: str | None
    user_id: str
    session_id: str
    messages: list[Message]


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
        self, tenant: str | None, user_id: str, session_id: str, messages: Sequence[Message]
    ) -> None:
        """Keep ``messages`` of ``session_id`` to index later (the oldest dropped when full)."""
        if not messages:
            return
        self._batches.append(_Batch(tenant, user_id, session_id, list(messages)))
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
                )
                done += len(batch.messages)
            self._remove(batch)
        return done
