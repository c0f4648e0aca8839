"""LangGraph: convomem's view of a thread as the model's input, and a convomem ``BaseStore``
(extra ``langgraph``).

``ConvomemContext`` replaces ``trim_messages`` in a ``pre_model_hook``: instead of the
newest messages that fit, the model gets convomem's view of the thread (the system prompt,
the user's facts and what recall found, a summary of what was evicted, the newest
messages that fit, a tool call and its results always together), under a token budget::

    from langgraph.prebuilt import create_react_agent
    from convomem import open_store
    from convomem.integrations.langgraph import ConvomemContext

    db = open_store("sqlite:///threads.db")
    context = ConvomemContext(db, budget=8000)
    agent = create_react_agent(
        model, tools,
        pre_model_hook=context.pre_model_hook,
        post_model_hook=context.post_model_hook,
    )
    agent.invoke({"messages": [("user", "hi")]},
                 {"configurable": {"thread_id": "t1", "user_id": "u1"}})

Each thread (``configurable.thread_id``) is a durable convomem session owned by
``configurable.user_id``, so it resumes in any process. The hooks append to it what the
graph's ``messages`` hold that it does not (found by walking back from the newest message
to the one the session holds last: a turn costs what is new), and the pre-model hook
writes the view to ``llm_input_messages`` (``output=``), leaving the graph's state
unchanged. With a checkpointer the state keeps the whole thread and either hook keeps
the session current; without one, convomem is the thread's memory: pass only the new
message each run and use both hooks, so the model's final answer is kept too.

In a graph of your own, ``context.node`` is the same step (a node reading ``messages``
and writing the view to ``output``). Messages need ids (LangGraph's ``add_messages``
reducer gives every message one). ``ConvomemStore`` is LangGraph's long-term store over
convomem (``convomem.integrations.langgraph_store``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError, InvalidMessage, MissingDependency
from ..formats.langchain import from_langchain, to_langchain
from ..model import Message
from ..session import ConversationMemory
from ._session import Memories, Steps, arun, message_id, record, record_and_view, run
from .langgraph_store import ConvomemStore

try:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig, RunnableLambda
except ImportError:  # pragma: no cover - exercised in a process without the extra
    raise MissingDependency("convomem.integrations.langgraph", "langgraph", "langgraph") from None

__all__ = ["ConvomemContext", "ConvomemStore"]


def _lc_id(m: BaseMessage) -> str:
    if not isinstance(m, BaseMessage):
        raise InvalidMessage("messages", m, "must hold LangChain messages")
    if not m.id:
        raise InvalidMessage(
            "messages",
            m,
            "a message without an id: use the add_messages reducer, which gives every message one",
        )
    return m.id


def _convert(messages: Sequence[BaseMessage]) -> list[Message]:
    for m in messages:
        _lc_id(m)
    return from_langchain(messages)


class ConvomemContext:
    """Convomem's view of each LangGraph thread, for the model (see the module docstring).

    ``db`` is what ``open_store`` (sync graphs) or ``aopen_store`` (``ainvoke`` only)
    returns. ``budget`` and ``memory_options`` configure each thread's
    ``ConversationMemory`` (``tokenizer``, ``recall``: a ``RecallIndex`` over ``db``,
    ``summarizer``...). ``tenant`` scopes every thread; ``thread_key`` / ``user_key`` name
    the ``configurable`` entries holding the thread and its user. ``output`` is the state
    key the view goes to (``llm_input_messages`` for ``create_react_agent``'s hook;
    ``"messages"`` is refused: it would rewrite the thread). ``cache_size`` memories stay
    open.
    """

    def __init__(
        self,
        db: Any,
        *,
        budget: int = 4000,
        tenant: str | None = None,
        thread_key: str = "thread_id",
        user_key: str = "user_id",
        output: str = "llm_input_messages",
        memory_options: Mapping[str, Any] | None = None,
        cache_size: int = 128,
    ) -> None:
        options = dict(memory_options or {})
        if "budget" in options or "store" in options:
            raise ConfigError("memory_options: give budget= as its own keyword, the store as db=")
        if output == "messages":
            raise ConfigError("output='messages': the view would replace the thread; pick a key")
        self.memories = Memories(db, {"budget": budget, **options}, cache_size)
        self.tenant = tenant
        self.thread_key = thread_key
        self.user_key = user_key
        self.output = output
        self.pre_model_hook: RunnableLambda[Any, dict[str, Any]] = RunnableLambda(
            self.context, afunc=self.acontext, name="convomem_context"
        )
        """The pre-model hook (and ``node``): appends what is new, writes the view."""
        self.node = self.pre_model_hook
        self.post_model_hook: RunnableLambda[Any, dict[str, Any]] = RunnableLambda(
            self.record, afunc=self.arecord, name="convomem_record"
        )
        """The post-model hook: appends what is new (the model's answer), changes nothing."""

    def memory(self, config: RunnableConfig) -> ConversationMemory:
        """The ``ConversationMemory`` of the thread ``config`` names."""
        conf = config.get("configurable") or {}
        thread = conf.get(self.thread_key)
        if not isinstance(thread, str) or not thread:
            raise ConfigError(
                f"configurable.{self.thread_key}={thread!r}: the thread needs an id "
                "(its convomem session)"
            )
        user = conf.get(self.user_key)
        if user is not None and not isinstance(user, str):
            raise ConfigError(f"configurable.{self.user_key}={user!r}: must be a string")
        return self.memories.get(thread, user_id=user, tenant=self.tenant)

    @staticmethod
    def _messages(state: Any) -> Sequence[BaseMessage]:
        messages = state.get("messages") if isinstance(state, Mapping) else state.messages
        if not isinstance(messages, Sequence):
            raise InvalidMessage("messages", messages, "the graph's state needs a messages list")
        return messages

    def _context(self, state: Any) -> Steps[dict[str, Any]]:
        view = yield from record_and_view(self._messages(state), _lc_id, message_id, _convert)
        return {self.output: to_langchain(view)}

    def _record(self, state: Any) -> Steps[dict[str, Any]]:
        yield from record(self._messages(state), _lc_id, message_id, _convert)
        return {}

    def context(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The pre-model step: append what is new, return ``{output: view}``."""
        return run(self.memory(config), self._context(state))

    async def acontext(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Async twin of ``context``."""
        return await arun(self.memory(config), self._context(state))

    def record(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """The post-model step: append what is new; no state update."""
        return run(self.memory(config), self._record(state))

    async def arecord(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        """Async twin of ``record``."""
        return await arun(self.memory(config), self._record(state))
