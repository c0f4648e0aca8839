"""LangChain's ``BaseChatMessageHistory`` over a convomem session (extra ``langchain``).

``ConvomemChatMessageHistory(session_id, db)`` keeps a conversation in a convomem store
database (``open_store("sqlite:///chat.db")``; Redis and PostgreSQL too), so it works
wherever LangChain takes a chat history, ``RunnableWithMessageHistory`` included::

    from langchain_core.runnables.history import RunnableWithMessageHistory
    from convomem import open_store
    from convomem.integrations.langchain import ConvomemChatMessageHistory

    db = open_store("sqlite:///chat.db")
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: ConvomemChatMessageHistory(session_id, db, budget=8000),
        input_messages_key="question",
        history_messages_key="history",
    )

Messages are stored whole (``convomem.formats.langchain``): an ``AIMessage``'s
``tool_calls`` and each ``ToolMessage`` answering them come back as they went in, ids,
``additional_kwargs`` and ``response_metadata`` included, so an agent that resumes a
session can send its history to a provider again (a history that drops the calls or the
results is one no provider accepts).

With ``budget=N``, ``messages`` is the session's view rather than its whole log: the
system prompt, the user's facts and what recall found (with ``recall=`` in
``memory_options``), a summary of what was evicted and the newest messages that fit in
``N`` tokens, a tool call and its results always together; an exchange still open (a
tool call whose results the next input brings) follows the view, so the results have
their call. The log keeps everything
(``all_messages()``). Without ``budget``, ``messages`` is the whole log, as LangChain's
own histories give it.

The sync methods need a sync database (``open_store``); the async ones
(``aget_messages``, ``aadd_messages``, ``aclear``) take either kind (a sync store is called
in the event loop's thread, as ``ConversationMemory`` does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError, MissingDependency
from ..formats.langchain import from_langchain, to_langchain
from ..model import Message, is_derived_id, new_id
from ._session import Append, Log, Memories, Steps, arun, run, view_and_open_exchange

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import BaseMessage
except ImportError:  # pragma: no cover - exercised in a process without the extra
    raise MissingDependency(
        "convomem.integrations.langchain", "langchain", "langchain-core"
    ) from None

__all__ = ["ConvomemChatMessageHistory"]


class ConvomemChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history stored in a convomem session.

    ``db`` is what ``open_store`` / ``aopen_store`` returns; ``user_id`` and ``tenant``
    scope the session as ``db.session`` does. ``budget`` turns ``messages`` into a
    bounded view (see the module docstring); ``memory_options`` are the other keywords of
    the ``ConversationMemory`` behind it (``tokenizer``, ``recall``, ``summarizer``,
    ``pin``...), which is ``self.memory``.
    """

    def __init__(
        self,
        session_id: str,
        db: Any,
        *,
        user_id: str | None = None,
        tenant: str | None = None,
        budget: int | None = None,
        memory_options: Mapping[str, Any] | None = None,
    ) -> None:
        options = dict(memory_options or {})
        if "budget" in options or "store" in options:
            raise ConfigError(
                "memory_options: give budget= as its own keyword, and the store as db="
            )
        if budget is not None:
            options["budget"] = budget
        self.session_id = session_id
        self.budget = budget
        self.memory = Memories(db, options, size=1).get(session_id, user_id=user_id, tenant=tenant)

    def _read(self) -> Steps[list[BaseMessage]]:
        if self.budget is None:
            messages: list[Message] = yield Log()
        else:
            messages = yield from view_and_open_exchange()
        return to_langchain(messages)

    @staticmethod
    def _write(messages: Sequence[BaseMessage]) -> Steps[None]:
        # Bad input raises before anything is written. A message without an id (LangChain
        # gives none to inputs) gets a fresh one: each add is a new message; none is
        # written back (``formats.langchain`` remembers it had none).
        converted = [
            m.replace(id=new_id()) if is_derived_id(m.id) else m for m in from_langchain(messages)
        ]
        if converted:
            yield Append(converted)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages: its view with ``budget``, else its whole log."""
        return run(self.memory, self._read())

    async def aget_messages(self) -> list[BaseMessage]:
        """Async twin of ``messages``."""
        return await arun(self.memory, self._read())

    def all_messages(self) -> list[BaseMessage]:
        """The whole log, whatever the budget."""
        return to_langchain(self.memory.messages())

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` (malformed ones raise ``InvalidMessage`` naming the
        message and field, before anything is written)."""
        run(self.memory, self._write(messages))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async twin of ``add_messages``."""
        await arun(self.memory, self._write(messages))

    def clear(self) -> None:
        """Remove every message of the session (its summary and view too)."""
        self.memory.clear(keep_system=False)

    async def aclear(self) -> None:
        """Async twin of ``clear``."""
        await self.memory.aclear(keep_system=False)

    def __repr__(self) -> str:
        return f"ConvomemChatMessageHistory({self.session_id!r}, budget={self.budget!r})"
