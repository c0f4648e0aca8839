"""The per-process cache of open session memories, so a request does not resume its
session from the store's derived state every time.

Resuming decodes the derived state (summary, facts ledger, covered ids...), which grows
with the session: without a cache a turn's cost grows with the session's length. A
cached memory is reused only when the store agrees it is current: the ``SessionInfo`` the
route read anyway (one cheap read) must show the seq, state version and creation time
the memory last knew, and with recall the user's facts must be at the version the
memory holds. Another replica's append moves the seq, its state save moves the
version, a delete-and-recreate moves the creation time, a facts save or edit anywhere
moves the facts version: the memory is then dropped and a fresh one resumes from the
store. Correctness never depends on the cache; it only
saves the resume.

One ``asyncio.Lock`` per session: two requests of one process never use one memory at
once (the second waits, then validates against the seq the first left). Entries are
LRU-bounded (``Settings.memory_cache``; 0 turns the cache off) and evicted when their
session is deleted, expires or its user is erased. A memory with recall also read its
owner's facts when it was made: it is reused only while the owner's expired sessions
are the ones they were then (``use(tag=)``), so no fact of a session that expired since
is served from it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from ..session import ConversationMemory
from ..stores.database import SessionInfo

__all__ = ["MemoryCache"]

CacheKey = tuple[str | None, str, str | None, int]
"""(tenant, session id, owner user id, budget)."""


@dataclass(slots=True)
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    memory: ConversationMemory | None = None
    created_at: float = 0.0
    tag: Hashable = None  # what else the memory read depends on (see ``use``)
    users: int = 0  # requests holding or waiting for the lock: never evicted meanwhile


def _fresh(
    memory: ConversationMemory, created_at: float, info: SessionInfo, facts: int | None
) -> bool:
    """Whether ``memory`` is what a resume from the store would give now; ``facts``: the
    user's stored facts version (None: not checked)."""
    position = memory.position
    if position is None:
        return True  # it resumes on first use anyway
    same = created_at == info.created_at and position == (info.last_seq, info.state_version)
    if same and facts is not None:
        tier = memory.stats().facts
        same = tier is None or tier.get("version") == facts
    return same


class MemoryCache:
    """Open memories by (tenant, session, owner, budget), at most ``size`` of them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[CacheKey, _Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return sum(1 for e in self._entries.values() if e.memory is not None)

    @asynccontextmanager
    async def use(
        self,
        tenant: str | None,
        info: SessionInfo,
        budget: int,
        make: Callable[[], ConversationMemory],
        facts: int | None = None,
        tag: Hashable = None,
    ) -> AsyncIterator[ConversationMemory]:
        """The session's memory, held exclusively until the block ends: the cached one
        when the store agrees it is current (and its facts are at version ``facts``,
        when given) and ``tag`` (what else it read depends on: the owner's expired
        sessions, whose facts it must not hold) is what it was when the memory was
        made, else ``make()`` (then cached)."""
        if self.size <= 0:
            yield make()
            return
        key: CacheKey = (tenant, info.session_id, info.user_id, budget)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        self._entries.move_to_end(key)
        entry.users += 1
        try:
            async with entry.lock:
                memory = entry.memory
                if (
                    memory is not None
                    and entry.tag == tag
                    and _fresh(memory, entry.created_at, info, facts)
                ):
                    self.hits += 1
                else:
                    self.misses += 1
                    memory = make()
                entry.memory, entry.created_at, entry.tag = None, info.created_at, tag
                yield memory
                # Cached only when the block ended normally: a failed request's memory
                # may hold a tentative view.
                if self._entries.get(key) is entry:
                    entry.memory = memory
        finally:
            entry.users -= 1
            self._trim()

    def _trim(self) -> None:
        while len(self._entries) > self.size:
            for k, e in self._entries.items():
                if e.users == 0:
                    del self._entries[k]
                    break
            else:
                return  # every entry is in use: trimmed when one is released

    def evict(
        self, tenant: str | None, session_id: str | None = None, user_id: str | None = None
    ) -> int:
        """Drop the entries of a session (``session_id``) or of a user (``user_id``) of
        ``tenant``; a request holding one keeps its memory but does not cache it back."""
        gone = [
            k
            for k in self._entries
            if k[0] == tenant
            and (session_id is None or k[1] == session_id)
            and (user_id is None or k[2] == user_id)
        ]
        for k in gone:
            del self._entries[k]
        return len(gone)
