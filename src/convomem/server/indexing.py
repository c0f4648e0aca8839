"""After an append: the memory's background work settled and the new messages indexed
for recall.

- ``settle``: ``memory.aflush()`` (what left the view indexed, the user's facts saved).
- ``index_appended``: the appended messages indexed with the seqs the log gave them (so
  a hit on one brings its neighbouring turns), then what earlier appends could not.

A recall failure never fails the append: the messages are stored; they wait in the
process's ``RecallBacklog``.
"""

from __future__ import annotations

import logging

from ..model import Message
from ..recall.guarded import OUTAGES
from ..session import ConversationMemory
from ..stores.database import SessionInfo
from ..stores.expiry import expired
from ._recall_backlog import with_seqs
from .deps import ApiKey, Services

__all__ = ["index_appended", "settle"]

log = logging.getLogger("convomem.server")


async def settle(services: Services, memory: ConversationMemory) -> None:
    """``memory.aflush()`` after an append: what left the view indexed, the user's facts
    saved. The messages are stored: a recall failure here (``OUTAGES``) is logged, and
    the wait is made once more, so the facts save that follows the index's
    report still runs (what the memory handed the index this time is not indexed)."""
    for attempt in (1, 2):
        try:
            await memory.aflush()
            return
        except OUTAGES as exc:
            if attempt == 2:
                log.warning("recall: background indexing failed again: %s", exc)
            else:
                log.warning("recall: background indexing failed: %s", exc)


async def index_appended(
    services: Services, key: ApiKey, info: SessionInfo, messages: list[Message]
) -> None:
    """Index appended ``messages`` for recall (each once: O(new messages)), then what
    earlier appends could not. A failure (``OUTAGES``: the embedder down, slow or
    rate-limited, the index's database) fails nothing: the messages are stored; they
    wait in ``services.backlog`` for a later append (``RecallBacklog``)."""
    recall, backlog, sid = services.recall, services.backlog, info.session_id
    if recall is None or info.user_id is None or not messages:
        return
    store = services.db.session(sid, tenant=key.tenant)
    batches = await with_seqs(store, messages, info.last_seq)  # their seqs: hits get neighbours
    try:
        while batches:
            batch, seqs = batches[0]
            await recall.add(
                batch, user_id=info.user_id, session_id=sid, tenant=key.tenant, seqs=seqs
            )
            batches.pop(0)
    except OUTAGES as exc:
        if not backlog:
            log.warning("recall: indexing failed, appended messages wait to be indexed: %s", exc)
        for batch, seqs in batches:
            backlog.put(key.tenant, info.user_id, sid, batch, seqs)
        services.metrics.add("recall_ingest_failures", sum(len(b) for b, _ in batches))
        return
    if backlog:

        async def exists(tenant: str | None, session_id: str) -> bool:
            found = await services.db.session(session_id, tenant=tenant).info()
            return found is not None and not expired(found)

        try:
            await backlog.drain(recall, exists)
        except OUTAGES as exc:
            log.warning("recall: indexing the waiting messages failed: %s", exc)
        else:
            if not backlog:
                log.info("recall: the messages that waited are indexed")
