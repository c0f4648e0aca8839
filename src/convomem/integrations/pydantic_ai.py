"""pydantic-ai: convomem's view of a session as what the model reads (extra ``pydantic-ai``).

``convomem_history(memory)`` gives an agent convomem's view instead of the whole message
history: the system prompt, the user's facts and what recall found (with ``recall=``), a
summary of what was evicted and the newest messages that fit in the memory's budget, a
tool call and its return always together::

    from pydantic_ai import Agent
    from convomem import ConversationMemory, open_store
    from convomem.integrations.pydantic_ai import convomem_history

    db = open_store("sqlite:///agent.db")
    memory = ConversationMemory(8000, store=db.session("s1", user_id="u1"))
    agent = Agent(model, capabilities=[convomem_history(memory)])
    await agent.run("hi")          # no message_history needed: the session is the memory

What it returns is a pydantic-ai capability. Before each model request it appends to the
memory what the history holds that the memory does not (found by walking back from the
newest message to the one the memory holds last, so a turn costs what is new), and sends
the view instead; the run's own history is left as it is, so ``result.all_messages()`` is
unchanged. After the run it appends the model's final answer. Pass ``message_history`` or
not: either way the session holds each message once, and an agent's ``system_prompt``,
which pydantic-ai repeats in every run started without history, is kept once.

This is how pydantic-ai 2.x runs a history processor (``ProcessHistory`` is a capability
doing the same before each request), with one difference: ``ProcessHistory`` writes the
processed list back as the run's history, which pydantic-ai then normalizes (consecutive
requests merged), so the session could no longer tell which messages it already holds;
this capability sends the view and keeps the history.

Messages go through ``convomem.formats.pydantic_ai``: each keeps its own serialization,
so what the model receives is pydantic-ai's own messages (instructions, tool parts,
thinking, timestamps), convomem's summary and facts as system prompt parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import MissingDependency
from ..formats.pydantic_ai import from_pydantic_ai, key, model_key, to_pydantic_ai
from ..model import Message
from ..session import ConversationMemory
from ._session import Append, Newest, Steps, View, arun, unseen

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelMessage
except ImportError:  # pragma: no cover - exercised in a process without the extra
    raise MissingDependency(
        "convomem.integrations.pydantic_ai", "pydantic-ai", "pydantic-ai-slim"
    ) from None

__all__ = ["ConvomemHistory", "convomem_history"]


def _record(messages: Sequence[ModelMessage]) -> Steps[None]:
    """Append what ``messages`` hold that the memory does not; a system prompt already in
    the view (an agent's ``system_prompt``, repeated by every run without history) once."""
    newest: Message | None = yield Newest()
    new = from_pydantic_ai(unseen(messages, None if newest is None else key(newest), model_key))
    if newest is not None and any(m.role == "system" for m in new):
        view: list[Message] = yield View()
        said = {m.text() for m in view if m.role == "system"}
        new = [m for m in new if m.role != "system" or m.text() not in said]
    if new:
        yield Append(new)


def _record_and_view(messages: Sequence[ModelMessage], query: str | None) -> Steps[list[Any]]:
    yield from _record(messages)
    view: list[Message] = yield View(query)
    return to_pydantic_ai(view)


class ConvomemHistory(AbstractCapability[Any]):
    """A pydantic-ai capability giving the model convomem's view of ``memory`` before each
    request; see the module docstring. ``query`` is recall's query (default: the newest
    user message)."""

    def __init__(self, memory: ConversationMemory, *, query: str | None = None) -> None:
        if not isinstance(memory, ConversationMemory):
            from ..errors import ConfigError

            raise ConfigError(f"memory={memory!r}: must be a ConversationMemory")
        self.memory = memory
        self.query = query

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live memory: not built from a spec

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        """Send the view instead of the history (the run's history is left as it is)."""
        messages = list(request_context.messages)
        request_context.messages = await arun(self.memory, _record_and_view(messages, self.query))
        return request_context

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        """Append the run's final answer (and anything else not appended yet)."""
        await arun(self.memory, _record(result.all_messages()))
        return result


def convomem_history(memory: ConversationMemory, *, query: str | None = None) -> ConvomemHistory:
    """The history processing that gives an agent ``memory``'s view, as a capability:
    ``Agent(model, capabilities=[convomem_history(memory)])`` (or ``agent.run(...,
    capabilities=[...])`` for one run)."""
    return ConvomemHistory(memory, query=query)
