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

The SDK's ``Session`` is a structural protocol, so this module imports nothing of the
SDK at run time: it works (and is importable) without ``openai-agents`` installed; the
SDK itself comes with ``pip install 'convomem[agents]'``. A sync database is called in
a worker thread (``asyncio.to_thread``), never blocking the event loop; an async one is
awaited directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from .._io import is_async_callable
from ..errors import ConfigError
from ..formats.openai_responses import from_responses, to_responses
from ..model import Message, new_id
from ..stores.database import AsyncSessionStore, SessionStore

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

__all__ = ["ConvomemSession"]


class ConvomemSession:
    """An Agents SDK session (``session_id``, ``get_items``, ``add_items``, ``pop_item``,
    ``clear_session``) stored in a convomem store database.

    ``db`` is what ``open_store`` or ``aopen_store`` returns; ``user_id`` and ``tenant``
    scope the session as ``db.session`` does (a session written by another user raises
    ``SessionOwnerMismatch``). ``session_settings`` is the SDK's ``SessionSettings``
    (its ``limit`` applies when ``get_items`` is called without one).
    """

    def __init__(
        self,
        session_id: str,
        db: Any,
        *,
        user_id: str | None = None,
        tenant: str | None = None,
        session_settings: SessionSettings | None = None,
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

    async def _call(self, name: str, *args: Any) -> Any:
        method: Callable[..., Any] = getattr(self.store, name)
        if self._async:
            return await method(*args)
        return await asyncio.to_thread(method, *args)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit``, the newest ``limit``."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        messages: list[Message] = await self._call("get_items", limit)
        items = to_responses(messages)
        if limit is not None:  # a message written by another writer may give several
            items = items[-limit:] if limit > 0 else []
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` atomically; malformed ones raise ``InvalidMessage`` naming the
        item and field, and nothing is written."""
        messages = [m.replace(id=new_id()) for m in from_responses(items)]
        if messages:
            await self._call("add_items", messages)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item and return it (None when the session is empty)."""
        message: Message | None = await self._call("pop_item")
        if message is None:
            return None
        items = to_responses([message])
        return cast("TResponseInputItem", items[-1]) if items else None

    async def clear_session(self) -> None:
        """Remove every item of the session."""
        await self._call("clear_session")

    def __repr__(self) -> str:
        return f"ConvomemSession({self.session_id!r}, store={self.store!r})"
