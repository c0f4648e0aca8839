"""Drivers for sans-I/O generators: the one place sync and async twins differ.

Logic that needs I/O (a store call, a summarizer, a sleep) is written once as a
generator that yields a request and receives its result. ``drive`` performs each request
synchronously, ``adrive`` in an event loop; an exception raised while performing a
request is thrown back into the generator, so the logic decides how to recover.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

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
