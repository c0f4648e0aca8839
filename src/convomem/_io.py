"""Drivers for sans-I/O generators: the one place sync and async twins differ.

Logic that needs I/O (a store call, a summarizer, a sleep) is written once as a
generator that yields a request and receives its result. ``drive`` performs each request
synchronously, ``adrive`` in an event loop; an exception raised while performing a
request is thrown back into the generator, so the logic decides how to recover.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from .errors import AsyncInSyncError

S = TypeVar("S")
T = TypeVar("T")


def drive(
    gen: Generator[S, Any, T],
    perform: Callable[[S], Any],
    *,
    passthrough: tuple[type[BaseException], ...] = (),
) -> T:
    """Run ``gen`` to completion, performing each yielded step with ``perform``.

    Exceptions of the ``passthrough`` types close the generator and propagate as they
    are (a misuse the logic cannot recover from); any other ``Exception`` is thrown in.
    """
    send: Any = None
    exc: Exception | None = None
    while True:
        try:
            step = gen.send(send) if exc is None else gen.throw(exc)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            send, exc = perform(step), None
        except passthrough:
            gen.close()
            raise
        except Exception as e:
            send, exc = None, e


async def adrive(
    gen: Generator[S, Any, T],
    perform: Callable[[S], Awaitable[Any]],
    *,
    passthrough: tuple[type[BaseException], ...] = (),
) -> T:
    """The async twin of ``drive``: each step is awaited."""
    send: Any = None
    exc: Exception | None = None
    while True:
        try:
            step = gen.send(send) if exc is None else gen.throw(exc)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            send, exc = await perform(step), None
        except passthrough:
            gen.close()
            raise
        except Exception as e:
            send, exc = None, e


async def maybe_await(value: Any) -> Any:
    """``value``, awaited first if it is awaitable (a sync or an async callable's result)."""
    return (await value) if inspect.isawaitable(value) else value


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` returns a coroutine (async functions, async ``__call__``,
    ``functools.partial`` of either)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - the bound __call__ of an instance
    )


def in_running_loop() -> bool:
    """Whether the calling thread is inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_awaitable(
    result: Awaitable[Any], message: str, error: type[AsyncInSyncError] = AsyncInSyncError
) -> Any:
    """Run a coroutine a sync caller got back, to completion, when no loop is running.

    Inside a running loop that would deadlock: the coroutine is closed and ``error``
    (an ``AsyncInSyncError``) is raised with ``message``, which names the async twin.
    """
    if not in_running_loop():

        async def wait() -> Any:
            return await result

        return asyncio.run(wait())
    close = getattr(result, "close", None)
    if callable(close):
        close()  # never awaited: avoid the "coroutine was never awaited" warning
    raise error(message)


class LoopLock:
    """An asyncio lock per event loop (a lock made in one loop cannot serve another)."""

    __slots__ = ("_lock", "_loop")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    def get(self) -> asyncio.Lock:
        """The lock of the running loop."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._loop, self._lock = loop, asyncio.Lock()
        return self._lock
