"""LlamaIndex: a ``BaseMemory`` and a ``BaseChatStore`` over convomem (extra ``llamaindex``).

``ConvomemMemory`` is an agent's memory: LlamaIndex agents (``FunctionAgent``,
``ReActAgent``, ``AgentWorkflow``) ``put`` each message in it and call ``get(input=...)``
for what the model reads, which is convomem's view of the session: the system prompt, the
user's facts and what recall found for ``input`` (with ``recall=`` in ``memory_options``),
a summary of what was evicted and the newest messages that fit in ``budget`` tokens, a
tool call and its results always together::

    from llama_index.core.agent.workflow import FunctionAgent
    from convomem import open_store
    from convomem.integrations.llamaindex import ConvomemMemory

    db = open_store("sqlite:///agent.db")
    memory = ConvomemMemory.from_defaults(db=db, session_id="s1", user_id="u1", budget=8000)
    response = await FunctionAgent(tools=tools, llm=llm).run("hi", memory=memory)

``ConvomemChatStore`` is LlamaIndex's chat store (one convomem session per key), for
``ChatMemoryBuffer`` / ``Memory`` and anything else taking a ``chat_store``.

Messages are stored whole (``convomem.formats.llamaindex``): ``ToolCallBlock``s and the
tool messages answering them come back as they went in. Each message put gets a fresh id
(a ``ChatMessage`` has none). Nothing downloads: llama-index-core ships the NLTK data and
the tiktoken encoding it uses (``llama_index/core/_static``), and convomem counts tokens
with its own tokenizer; leave ``NLTK_DATA`` unset (or point it at a copy of that data).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from .._io import is_async_callable
from ..errors import ConfigError, MissingDependency
from ..formats.llamaindex import from_llamaindex, to_llamaindex
from ..model import Message, new_id
from ..session import ConversationMemory
from ._session import Append, Call, Clear, Log, Memories, Steps, View, acall, arun, call, run

try:
    from llama_index.core.bridge.pydantic import ConfigDict, Field
    from llama_index.core.llms import ChatMessage
    from llama_index.core.memory import BaseMemory
    from llama_index.core.storage.chat_store import BaseChatStore
except ImportError:  # pragma: no cover - exercised in a process without the extra
    raise MissingDependency(
        "convomem.integrations.llamaindex", "llamaindex", "llama-index-core"
    ) from None

__all__ = ["ConvomemChatStore", "ConvomemMemory"]

T = TypeVar("T")
Gen = Generator[Call, Any, T]


def _fresh(messages: Sequence[ChatMessage]) -> list[Message]:
    """Convert (bad input raises before anything is written), each with a fresh id."""
    return [m.replace(id=new_id()) for m in from_llamaindex(messages)]


def _write(messages: Sequence[ChatMessage]) -> Steps[None]:
    converted = _fresh(messages)
    if converted:
        yield Append(converted)


def _view(query: str | None) -> Steps[list[ChatMessage]]:
    view: list[Message] = yield View(query)
    return to_llamaindex(view)


def _log() -> Steps[list[ChatMessage]]:
    log: list[Message] = yield Log()
    return to_llamaindex(log)


class ConvomemMemory(BaseMemory):
    """A LlamaIndex agent memory over a convomem session (see the module docstring).

    Build it with ``from_defaults(db=..., session_id=...)``; ``memory`` is the
    ``ConversationMemory`` behind it. The sync methods need a sync database, the async
    ones (which agents use) take either kind.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    memory: ConversationMemory = Field(exclude=True)
    search_input: bool = False
    """Whether ``get(input=...)`` searches recall for ``input`` (the memory has ``recall=``
    or ``extractor=``; ``from_defaults`` sets it); else ``input`` is not used."""

    @classmethod
    def class_name(cls) -> str:
        return "ConvomemMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        *,
        db: Any,
        session_id: str,
        user_id: str | None = None,
        tenant: str | None = None,
        budget: int = 4000,
        memory_options: Mapping[str, Any] | None = None,
    ) -> ConvomemMemory:
        """The memory of ``session_id`` in ``db`` (``open_store`` / ``aopen_store``),
        owned by ``user_id`` in ``tenant``; ``memory_options`` are the other keywords of
        its ``ConversationMemory`` (``tokenizer``, ``recall``, ``summarizer``...)."""
        options = dict(memory_options or {})
        if "budget" in options or "store" in options:
            raise ConfigError("memory_options: give budget= as its own keyword, the store as db=")
        memories = Memories(db, {"budget": budget, **options}, size=1)
        memory = memories.get(session_id, user_id=user_id, tenant=tenant)
        search = options.get("recall") is not None or options.get("extractor") is not None
        return cls(memory=memory, search_input=search)

    def get(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        """The view, recall searched for ``input`` (default: the newest user message)."""
        return run(self.memory, _view(input if self.search_input else None))

    async def aget(self, input: str | None = None, **kwargs: Any) -> list[ChatMessage]:
        return await arun(self.memory, _view(input if self.search_input else None))

    def get_all(self) -> list[ChatMessage]:
        """The whole log."""
        return run(self.memory, _log())

    async def aget_all(self) -> list[ChatMessage]:
        return await arun(self.memory, _log())

    def put(self, message: ChatMessage) -> None:
        run(self.memory, _write([message]))

    async def aput(self, message: ChatMessage) -> None:
        await arun(self.memory, _write([message]))

    def put_messages(self, messages: list[ChatMessage]) -> None:
        run(self.memory, _write(messages))

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        await arun(self.memory, _write(messages))

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the history by ``messages`` (checked before anything is removed)."""
        run(self.memory, _replace(messages))

    async def aset(self, messages: list[ChatMessage]) -> None:
        await arun(self.memory, _replace(messages))

    def reset(self) -> None:
        """Empty the session (log, summary and view)."""
        run(self.memory, _replace([]))

    async def areset(self) -> None:
        await arun(self.memory, _replace([]))


def _replace(messages: Sequence[ChatMessage]) -> Steps[None]:
    converted = _fresh(messages)
    yield Clear()
    if converted:
        yield Append(converted)


# -- the chat store: generators of store calls -------------------------------------------


def _set_messages(session: Any, messages: Sequence[ChatMessage]) -> Gen[None]:
    converted = _fresh(messages)
    yield session.clear_session
    if converted:
        yield partial(session.add_items, converted)
    elif (yield session.info) is None:  # the key exists from now on, empty
        yield partial(session.set_metadata, {})


def _get_messages(session: Any) -> Gen[list[ChatMessage]]:
    return to_llamaindex((yield session.get_items))


def _add_message(session: Any, message: ChatMessage) -> Gen[None]:
    yield partial(session.add_items, _fresh([message]))


def _delete_messages(store: ConvomemChatStore, key: str) -> Gen[list[ChatMessage] | None]:
    session = store.session(key)
    held = yield session.get_items
    if not held and (yield session.info) is None:
        return None
    yield partial(store.db.delete_session, key, user_id=store.user_id, tenant=store.tenant)
    return to_llamaindex(held)


def _delete_message(session: Any, idx: int) -> Gen[ChatMessage | None]:
    held = yield session.get_items
    if not 0 <= idx < len(held):
        return None
    yield partial(session.truncate, idx)
    if held[idx + 1 :]:
        yield partial(session.add_items, held[idx + 1 :])
    return to_llamaindex([held[idx]])[0]


def _delete_last(session: Any) -> Gen[ChatMessage | None]:
    popped = yield session.pop_item
    return None if popped is None else to_llamaindex([popped])[-1]


def _keys(store: ConvomemChatStore) -> Gen[list[str]]:
    keys: list[str] = []
    cursor: str | None = None
    while True:
        infos, cursor = yield partial(
            store.db.sessions, user_id=store.user_id, tenant=store.tenant, cursor=cursor, limit=500
        )
        keys += [i.session_id for i in infos]
        if cursor is None:
            return keys


class ConvomemChatStore(BaseChatStore):
    """LlamaIndex's ``BaseChatStore`` over a convomem database: each key is a session
    (owned by ``user_id`` in ``tenant``), its messages the session's log.

    ``get_keys`` lists the sessions of the user (of the tenant without one).
    ``delete_message(key, idx)`` of a message that is not the newest rewrites the log
    after it (the log is append-only: the messages after ``idx`` are removed and put back),
    so it costs what follows the message. The sync methods need a sync database; the async
    ones take either kind.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    db: Any = Field(exclude=True)
    user_id: str | None = None
    tenant: str | None = None

    @classmethod
    def class_name(cls) -> str:
        return "ConvomemChatStore"

    def session(self, key: str) -> Any:
        """The convomem session store of ``key``."""
        if not isinstance(key, str) or not key:
            raise ConfigError(f"key={key!r}: must be a non-empty string (a session id)")
        return self.db.session(key, user_id=self.user_id, tenant=self.tenant)

    def _sync(self, steps: Gen[T]) -> T:
        if is_async_callable(self.db.sessions):
            raise ConfigError(f"db={self.db!r}: an async database; use the async methods")
        return call(steps)

    async def _async(self, steps: Gen[T]) -> T:
        return await acall(steps, is_async_callable(self.db.sessions))

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        self._sync(_set_messages(self.session(key), messages))

    def get_messages(self, key: str) -> list[ChatMessage]:
        return self._sync(_get_messages(self.session(key)))

    def add_message(self, key: str, message: ChatMessage) -> None:
        self._sync(_add_message(self.session(key), message))

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        return self._sync(_delete_messages(self, key))

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        return self._sync(_delete_message(self.session(key), idx))

    def delete_last_message(self, key: str) -> ChatMessage | None:
        return self._sync(_delete_last(self.session(key)))

    def get_keys(self) -> list[str]:
        return self._sync(_keys(self))

    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        await self._async(_set_messages(self.session(key), messages))

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        return await self._async(_get_messages(self.session(key)))

    async def async_add_message(self, key: str, message: ChatMessage) -> None:
        await self._async(_add_message(self.session(key), message))

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        return await self._async(_delete_messages(self, key))

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        return await self._async(_delete_message(self.session(key), idx))

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        return await self._async(_delete_last(self.session(key)))

    async def aget_keys(self) -> list[str]:
        return await self._async(_keys(self))
