"""The article's ``llm`` argument: a chat model, or any convomem summarizer in its place.

The memory-patterns article calls ``await llm.ainvoke(prompt)`` and reads
``response.content`` (a LangChain chat model). ``ChatModel`` wraps any object with
``invoke(prompt)`` and/or ``ainvoke(prompt)`` returning a string or a message with a
string ``content``; ``PromptSummarizer`` turns it into a convomem summarizer by
rendering ``(messages, previous)`` into the article's prompt. A plain callable is taken
as a convomem summarizer (``(messages, previous) -> str``, sync or async) and ``None``
as the offline ``ExtractiveSummarizer``.

The designs that use it write their logic once, as generators yielding ``Summarize``
and ``Ask`` steps; ``run`` performs them synchronously and ``arun`` in an event loop.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from .._io import adrive, drive, in_running_loop
from ..errors import AsyncSummarizerError, ConfigError, SummarizerError
from ..model import Message
from ..summaries import ExtractiveSummarizer, SummarizerAdapter, Summary, as_summarizer

__all__ = [
    "Ask",
    "ChatModel",
    "PromptSummarizer",
    "Step",
    "Summarize",
    "arun",
    "is_chat_model",
    "response_text",
    "run",
    "summarizer_for",
]

T = TypeVar("T")


def is_chat_model(obj: object) -> bool:
    """True for an object with an ``invoke`` or ``ainvoke`` method (a chat model)."""
    return callable(getattr(obj, "ainvoke", None)) or callable(getattr(obj, "invoke", None))


def response_text(response: object, who: str) -> str:
    """The text of a chat model's answer: a str, or a message whose ``content`` is a str
    or a list of content parts (strings or ``{"text": ...}`` parts, joined)."""
    content = response if isinstance(response, str) else getattr(response, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    raise SummarizerError(
        f"{who} returned {type(response).__name__}: expected a str or a message with a str .content"
    )


async def _await(aw: Awaitable[T]) -> T:
    return await aw


class ChatModel:
    """A chat model called with one prompt string: ``ask`` (sync) and ``aask`` (async).

    ``ask`` uses ``invoke``, or runs ``ainvoke`` with ``asyncio.run`` when no event loop
    is running (inside one it raises ``AsyncSummarizerError``: use the async method).
    ``aask`` awaits ``ainvoke``, or runs ``invoke`` in a worker thread.
    """

    __slots__ = ("_ainvoke", "_invoke", "llm", "name")

    def __init__(self, llm: object) -> None:
        invoke = getattr(llm, "invoke", None)
        ainvoke = getattr(llm, "ainvoke", None)
        if not callable(invoke) and not callable(ainvoke):
            raise ConfigError(f"llm={llm!r}: must have an invoke or ainvoke method")
        self.llm = llm
        self._invoke: Callable[[str], Any] | None = invoke if callable(invoke) else None
        self._ainvoke: Callable[[str], Any] | None = ainvoke if callable(ainvoke) else None
        self.name = str(getattr(llm, "model_name", None) or type(llm).__name__)

    @property
    def needs_loop(self) -> bool:
        """True when only ``ainvoke`` exists (the sync path must start an event loop)."""
        return self._invoke is None

    def ask(self, prompt: str) -> str:
        """Send ``prompt``; return the answer's text."""
        if self._invoke is not None:
            result = self._invoke(prompt)
        else:
            assert self._ainvoke is not None
            if in_running_loop():
                raise AsyncSummarizerError(
                    f"llm {self.name!r} only has ainvoke and an event loop is running: "
                    "use the async method (await ...add_exchange(...))"
                )
            result = self._ainvoke(prompt)
        if inspect.isawaitable(result):
            if in_running_loop():  # an invoke that returned a coroutine, inside a loop
                close = getattr(result, "close", None)
                if callable(close):
                    close()
                raise AsyncSummarizerError(
                    f"llm {self.name!r} answered with an awaitable inside a running event "
                    "loop: use the async method (await ...add_exchange(...))"
                )
            result = asyncio.run(_await(result))
        return response_text(result, f"llm {self.name!r}")

    async def aask(self, prompt: str) -> str:
        """The async twin of ``ask``."""
        if self._ainvoke is not None:
            result = self._ainvoke(prompt)
        else:
            assert self._invoke is not None
            result = await asyncio.to_thread(self._invoke, prompt)
        if inspect.isawaitable(result):
            result = await result
        return response_text(result, f"llm {self.name!r}")

    def __repr__(self) -> str:
        return f"<ChatModel {self.name!r}>"


Render: TypeAlias = Callable[[Sequence[Message], Summary | None], str]


class PromptSummarizer:
    """A chat model as a convomem summarizer: ``render(messages, previous)`` is the prompt."""

    __slots__ = ("model", "name", "render")

    def __init__(self, model: ChatModel, render: Render) -> None:
        self.model = model
        self.render = render
        self.name = f"llm:{model.name}"

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        return self.model.ask(self.render(messages, previous))

    async def acall(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        return await self.model.aask(self.render(messages, previous))


def summarizer_for(llm: object, render: Render) -> tuple[SummarizerAdapter, ChatModel | None]:
    """The summarizer an ``llm`` argument stands for, and its chat model if it is one."""
    if llm is None:
        return as_summarizer(ExtractiveSummarizer()), None
    if is_chat_model(llm):
        model = ChatModel(llm)
        return as_summarizer(PromptSummarizer(model, render)), model
    if callable(llm):
        return as_summarizer(llm), None
    raise ConfigError(
        f"llm={llm!r}: must be a chat model (with invoke/ainvoke), a summarizer callable "
        "((messages, previous) -> str, sync or async) or None (offline extractive)"
    )


def needs_loop(adapter: SummarizerAdapter) -> bool:
    """Whether calling ``adapter`` synchronously must start an event loop."""
    fn = adapter.fn
    if isinstance(fn, PromptSummarizer):
        return fn.model.needs_loop
    return adapter.is_async


def check_sync_use(adapter: SummarizerAdapter, where: str) -> None:
    """Refuse a sync call that would have to start an event loop inside a running one.

    Checked before anything changes, so the refused call leaves the state as it was.
    """
    if needs_loop(adapter) and in_running_loop():
        raise AsyncSummarizerError(
            f"summarizer {adapter.name!r} is async and an event loop is running: use the "
            f"async method ({where}) instead of the sync one"
        )


# -- steps and their drivers ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Summarize:
    """Summarize ``messages`` (with ``previous``) with ``adapter``."""

    adapter: SummarizerAdapter
    messages: list[Message]
    previous: Summary | None


@dataclass(frozen=True, slots=True)
class Ask:
    """Send ``prompt`` to ``model``."""

    model: ChatModel
    prompt: str


Step: TypeAlias = Summarize | Ask


def _perform(step: Step) -> str:
    if isinstance(step, Summarize):
        return step.adapter(step.messages, step.previous)
    return step.model.ask(step.prompt)


async def _aperform(step: Step) -> str:
    if isinstance(step, Summarize):
        return await step.adapter.acall(step.messages, step.previous)
    return await step.model.aask(step.prompt)


def run(gen: Generator[Step, Any, T]) -> T:
    """Run logic synchronously; a misuse (``AsyncSummarizerError``) is not thrown in."""
    return drive(gen, _perform, passthrough=(AsyncSummarizerError,))


async def arun(gen: Generator[Step, Any, T]) -> T:
    """Run logic in an event loop."""
    return await adrive(gen, _aperform, passthrough=(AsyncSummarizerError,))
