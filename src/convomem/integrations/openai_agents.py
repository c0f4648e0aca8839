"""The OpenAI Agents SDK's ``Session`` over any convomem store database.

``ConvomemSession(session_id, db)`` keeps an agent's conversation in a convomem store
(``open_store("sqlite:///agents.db")``, or the async ``aopen_store(...)``; Redis and
PostgreSQL when their backends are installed), so a ``Runner`` resumes it in any process:

    from agents import Agent, Runner
    from convomem import open_store
    from convomem.integrations.openai_agents import ConvomemSession

    db = open_store("sqlite:///agents.db")
    session = ConvomemSession("conversation-1", db, user_id="u1")
    result = await Runner.run(agent, "Hello", session=session)

Items are stored as full convomem messages (``convomem.formats.openai_responses``): a
``function_call`` is an assistant tool call, its output the result answering it, so
``ConversationMemory``, ``load_history``, the CLI and the packers read the same session;
``get_items`` gives back exactly the items that were added. Every item gets a fresh
message id when added (the SDK may give different items the same placeholder id, and the
store treats a repeated id as a retry).

The SDK reads the whole history at every run (``get_items()``); the session reads the
stored log once and then keeps it, checking each time with one small query (the
session's newest seq, count and creation time: seqs are never reused) that no other
writer changed it, and extending it with its own appends (``append(...,
expected_seq=...)``), so a turn does not decode the log again. Another process's write
is seen at once: the check fails and the log is read again.

With ``budget=N`` the session is memory-managed: ``get_items`` returns the view of a
``ConversationMemory`` over the same log (pins, a summary of what was evicted, the
newest items that fit), so what the model reads stays bounded as the log grows.

The SDK's ``Session`` is a structural protocol, so this module imports nothing of the
SDK at run time: it works (and is importable) without ``openai-agents`` installed; the
SDK itself comes with ``pip install 'convomem[agents]'``. A sync database is called in
a worker thread (``asyncio.to_thread``), never blocking the event loop; an async one is
awaited directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from .._io import LoopLock, is_async_callable
from ..errors import ConcurrentUpdate, ConfigError
from ..formats.openai_responses import from_responses, to_responses
from ..model import Message, new_id
from ..session import ConversationMemory
from ..stores.base import check_limit
from ..stores.database import AsyncSessionStore, SessionInfo, SessionStore

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

__all__ = ["ConvomemSession"]

_Mark: TypeAlias = tuple[float, int, int]  # created_at, newest seq, message count


class ConvomemSession:
    """An Agents SDK session (``session_id``, ``get_items``, ``add_items``, ``pop_item``,
    ``clear_session``) stored in a convomem store database.

    ``db`` is what ``open_store`` or ``aopen_store`` returns; ``user_id`` and ``tenant``
    scope the session as ``db.session`` does (a session written by another user raises
    ``SessionOwnerMismatch``). ``session_settings`` is the SDK's ``SessionSettings``
    (its ``limit`` applies when ``get_items`` is called without one).

    ``budget=N`` makes ``get_items`` return a bounded view instead of the whole history:
    a ``ConversationMemory`` over the same log (``self.memory``; ``memory_options`` are
    its other keywords: ``summarizer``, ``tokenizer``, ``pin``...) gives the pinned
    messages, a summary of what it evicted and the newest items that fit in ``N``
    tokens, tool calls and their outputs together, rendered back as items. The log keeps
    every item (a session without ``budget`` on the same store reads them all); a turn
    costs what is new, not the history. Items are then appended one by one, not as one
    batch.
    """

    def __init__(
        self,
        session_id: str,
        db: Any,
        *,
        user_id: str | None = None,
        tenant: str | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        budget: int | None = None,
        memory_options: Mapping[str, Any] | None = None,
    ) -> None:
        opener = getattr(db, "session", None)
        if not callable(opener):
            raise ConfigError(f"db={db!r}: must be a store database (open_store / aopen_store)")
        self.session_id = session_id
        self.session_settings = session_settings
        self.store: SessionStore | AsyncSessionStore = opener(
            session_id, user_id=user_id, tenant=tenant
        )
        self._async = is_async_callable(self.store.get_items)
        self._cache: list[Message] | None = None
        self._cached_mark: _Mark | None = None
        self.memory: ConversationMemory | None = None
        if budget is not None:
            options = dict(memory_options or {})
            self.memory = ConversationMemory(budget, store=self.store, **options)
        elif memory_options:
            raise ConfigError("memory_options= needs budget= (the bounded view's token budget)")
        self._lock = LoopLock()

    async def _remember(self, name: str, *args: Any) -> Any:
        """Call the memory's ``name`` (its async twin over an async store; else in a
        worker thread), one call at a time per session object."""
        memory: Any = self.memory
        async with self._lock.get():
            if self._async:
                return await getattr(memory, "a" + name)(*args)
            return await asyncio.to_thread(getattr(memory, name), *args)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method: Callable[..., Any] = getattr(self.store, name)
        if self._async:
            return await method(*args, **kwargs)
        return await asyncio.to_thread(method, *args, **kwargs)

    async def _mark(self) -> _Mark | None:
        info: SessionInfo | None = await self._call("info")
        return None if info is None else (info.created_at, info.last_seq, info.message_count)

    async def _messages(self, limit: int | None) -> list[Message]:
        """The stored messages (the newest ``limit``), from the cache while it is valid.

        The cache holds the whole log read once; it is valid while the session's mark
        (created_at, newest seq, count) is the one it was read or extended at: seqs are
        never reused and stored messages never change, so an unchanged mark proves that
        no other writer appended, popped or cleared meanwhile.
        """
        mark = await self._mark()
        if mark is None:
            self._cache, self._cached_mark = [], None
            return []
        if self._cache is not None and mark == self._cached_mark:
            return self._cache if limit is None else self._cache[-limit:] if limit else []
        messages: list[Message] = await self._call("get_items", limit)
        if limit is None and await self._mark() == mark:  # nobody wrote while we read
            self._cache, self._cached_mark = messages, mark
        return messages

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit``, the newest ``limit``."""
        settings: Any = self.session_settings
        if limit is None and settings is not None:  # SessionSettings, or the SDK's dict form
            limit = settings.get("limit") if isinstance(settings, Mapping) else settings.limit
        check_limit(limit)
        if self.memory is not None:
            items = to_responses(await self._remember("context", "messages"))
        else:
            items = to_responses(await self._messages(limit))
        if limit is not None:  # a message written by another writer may give several
            items = items[-limit:] if limit > 0 else []
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` (atomically; one by one with ``budget``). Malformed ones raise
        ``InvalidMessage`` naming the item and field before anything is written."""
        messages = [m.replace(id=new_id()) for m in from_responses(items)]
        if not messages:
            return
        if self.memory is not None:
            for m in messages:  # one append each: the view and its summary follow
                await self._remember("add_message", m)
            return
        cache, mark = self._cache, self._cached_mark
        self._cache = self._cached_mark = None
        if cache is None or mark is None:
            await self._call("add_items", messages)
            return
        try:  # extend the cache only if nobody else wrote since it was valid
            last = await self._call("append", messages, expected_seq=mark[1])
        except ConcurrentUpdate:
            await self._call("add_items", messages)
            return
        cache.extend(messages)
        self._cache, self._cached_mark = cache, (mark[0], last, mark[2] + len(messages))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item and return it (None when the session is empty).

        The store removes its newest message: one item, unless another writer stored a
        message that renders as several (a native message with text and tool calls),
        which goes whole; the last of its items is returned."""
        self._cache = self._cached_mark = None
        message: Message | None
        if self.memory is not None:
            message = await self._remember("pop")
        else:
            message = await self._call("pop_item")
        if message is None:
            return None
        items = to_responses([message])
        return cast("TResponseInputItem", items[-1]) if items else None

    async def clear_session(self) -> None:
        """Remove every item of the session."""
        self._cache = self._cached_mark = None
        if self.memory is not None:
            await self._remember("clear", False)
        else:
            await self._call("clear_session")

    def __repr__(self) -> str:
        return f"ConvomemSession({self.session_id!r}, store={self.store!r})"
