"""The summarizer protocol and the adapter that runs any summarizer, sync or async."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol, TypeAlias, TypeVar

from .._io import in_running_loop
from ..errors import AsyncSummarizerError, ConfigError, SummarizerError
from ..model import Message
from .summary import Summary

T = TypeVar("T")

# -- the summarizer protocol and its adapter ----------------------------------------


class Summarizer(Protocol):
    """Turns messages (and the previous summary, if any) into summary text.

    The result is the summary of ``previous`` plus ``messages`` together. It may be
    ``async``. A plain ``(messages) -> str`` callable is accepted wherever a
    Summarizer is, and a summarizer object may offer an async twin as ``acall``.
    """

    def __call__(
        self, messages: Sequence[Message], previous: Summary | None, /
    ) -> str | Awaitable[str]: ...


SummarizerLike: TypeAlias = Callable[..., Any]
"""Anything ``as_summarizer`` accepts: ``(messages, previous)`` or ``(messages)``, sync or async."""


def _accepts_previous(fn: Callable[..., Any]) -> Literal["positional", "keyword", "no"]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "positional"  # builtins and C callables: assume the full protocol
    positional = [
        p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
        return "positional"
    if not positional:
        raise ConfigError(f"summarizer={fn!r}: must accept the messages as its first argument")
    if len(positional) >= 2:
        second = positional[1]
        if second.default is second.empty or second.name == "previous":
            return "positional"
    kw = sig.parameters.get("previous")
    if kw is not None and kw.kind is kw.KEYWORD_ONLY:
        return "keyword"
    return "no"


def _name_of(fn: Any) -> str:
    name = getattr(fn, "name", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(fn, functools.partial):
        return _name_of(fn.func)
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    return type(fn).__name__


def _check_text(result: Any, name: str) -> str:
    if not isinstance(result, str):
        raise SummarizerError(
            f"summarizer {name!r} returned {type(result).__name__}: must return a str"
        )
    return result


class SummarizerAdapter:
    """A summarizer of either form, called uniformly: ``adapter(messages, previous)``
    (sync) or ``await adapter.acall(messages, previous)``.

    The signature is inspected once. The sync call runs a coroutine summarizer with
    ``asyncio.run`` when no loop is running; inside a running loop it raises
    ``AsyncSummarizerError`` (a RuntimeError) telling you to use the async method.
    The async call runs a sync summarizer in a worker thread.
    """

    __slots__ = ("_acall", "_pass", "fn", "is_async", "name")

    def __init__(self, fn: SummarizerLike, *, name: str | None = None) -> None:
        if not callable(fn):
            raise ConfigError(f"summarizer={fn!r}: must be callable")
        self.fn = fn
        self.name = name or _name_of(fn)
        self._pass = _accepts_previous(fn)
        twin = getattr(fn, "acall", None)
        self._acall: Callable[..., Any] | None = (
            twin if callable(twin) and inspect.iscoroutinefunction(twin) else None
        )
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
        )

    @property
    def takes_previous(self) -> bool:
        """Whether the summarizer accepts ``previous`` (so it can extend a summary
        rather than rewrite it: ``SummaryEvict`` folds only the new messages in)."""
        return self._pass != "no"

    def _invoke(
        self, fn: Callable[..., Any], messages: Sequence[Message], previous: Summary | None
    ) -> Any:
        if self._pass == "positional":
            return fn(messages, previous)
        if self._pass == "keyword":
            return fn(messages, previous=previous)
        return fn(messages)

    def _misuse(self) -> AsyncSummarizerError:
        return AsyncSummarizerError(
            f"summarizer {self.name!r} is async and an event loop is running: use the async "
            "method (await running_summary.afold(...), await adapter.acall(...) or "
            "await asummarize(...)) instead of the sync one"
        )

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        """Summarize synchronously."""
        if self.is_async and in_running_loop():
            raise self._misuse()
        result = self._invoke(self.fn, list(messages), previous)
        if inspect.isawaitable(result):
            if in_running_loop():
                close = getattr(result, "close", None)
                if callable(close):
                    close()
                raise self._misuse()
            result = asyncio.run(_await(result))
        return _check_text(result, self.name)

    async def acall(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        """Summarize asynchronously.

        An async summarizer (or an async ``acall`` twin) is awaited; a sync one runs in a
        worker thread (``asyncio.to_thread``), so a slow or CPU-bound summarizer does not
        block the event loop.
        """
        msgs = list(messages)
        if self._acall is not None:
            result = self._invoke(self._acall, msgs, previous)
        elif self.is_async:
            result = self._invoke(self.fn, msgs, previous)
        else:
            result = await asyncio.to_thread(self._invoke, self.fn, msgs, previous)
        if inspect.isawaitable(result):
            result = await result
        return _check_text(result, self.name)

    def __repr__(self) -> str:
        return f"<SummarizerAdapter {self.name!r}{' async' if self.is_async else ''}>"


async def _await(aw: Awaitable[T]) -> T:
    return await aw


def as_summarizer(fn: SummarizerLike | SummarizerAdapter) -> SummarizerAdapter:
    """Adapt a summarizer of either form (sync or async) once; adapters pass through."""
    if isinstance(fn, SummarizerAdapter):
        return fn
    return SummarizerAdapter(fn)


def summarize(
    fn: SummarizerLike | SummarizerAdapter,
    messages: Sequence[Message],
    previous: Summary | None = None,
) -> str:
    """Run any summarizer synchronously (see ``SummarizerAdapter``)."""
    return as_summarizer(fn)(messages, previous)


async def asummarize(
    fn: SummarizerLike | SummarizerAdapter,
    messages: Sequence[Message],
    previous: Summary | None = None,
) -> str:
    """Run any summarizer asynchronously."""
    return await as_summarizer(fn).acall(messages, previous)
