"""Drivers for sans-I/O generators: the one place sync and async twins differ.

Logic that needs I/O (a store call, a summarizer, a sleep) is written once as a
generator that yields a request and receives its result. The requests are one
vocabulary: ``Call`` (call this function; the async driver calls its async twin when it
has one, and awaits what comes back) and ``Sleep``. ``run`` performs them synchronously,
``arun`` in an event loop; ``drive`` / ``adrive`` take any ``perform`` for generators whose
requests are data of their own (the HTTP client's ``Request``). An exception raised while
performing a request is thrown back into the generator, so the logic decides how to
recover.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

from .errors import AsyncInSyncError

S = TypeVar("S")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """A request to call ``fn(*args, **kwargs)`` and send back its result.

    ``afn``: the async twin the async driver calls instead (``afold`` for ``fold``).
    ``offload``: the async driver runs a sync ``fn`` in a worker thread (a slow sync
    summarizer must not block the event loop). A result that is awaitable is awaited by
    the async driver and refused by the sync one (``AsyncInSyncError``, or the error the
    caller of ``run`` chose): an async store or model reached from sync code.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    afn: Callable[..., Any] | None = None
    offload: bool = False


@dataclass(frozen=True, slots=True)
class Sleep:
    """A request to pause (a retry's backoff)."""

    seconds: float


Step: TypeAlias = Call | Sleep
Gen: TypeAlias = Generator[Step, Any, T]
"""A sans-I/O generator of this vocabulary, returning ``T``."""


def call(
    fn: Callable[..., Any], *args: Any, afn: Callable[..., Any] | None = None, **kwargs: Any
) -> Call:
    """``Call(fn, args, kwargs, afn)``, spelled as the call it stands for."""
    return Call(fn, args, kwargs, afn)


def _refused(step: Call) -> AsyncInSyncError:
    name = getattr(step.fn, "__qualname__", repr(step.fn))
    return AsyncInSyncError(f"{name} is async: use the async methods (the a-prefixed twins)")


class _Refusal(Exception):
    """Carries ``run``'s refusal out of ``drive`` without throwing it into the generator."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _perform(step: Step, refuse: Callable[[Call], Exception]) -> Any:
    """Perform one request synchronously (see ``Call``)."""
    if type(step) is Sleep:
        if step.seconds > 0:
            time.sleep(step.seconds)
        return None
    assert type(step) is Call
    result = step.fn(*step.args, **step.kwargs)
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()  # never awaited: no "coroutine was never awaited" warning
        raise _Refusal(refuse(step))
    return result


async def aperform(step: Step) -> Any:
    """Perform one request in the running event loop (see ``Call``)."""
    if type(step) is Sleep:
        if step.seconds > 0:
            await asyncio.sleep(step.seconds)
        return None
    assert type(step) is Call
    if step.afn is not None:
        result = step.afn(*step.args, **step.kwargs)
    elif step.offload and not is_async_callable(step.fn):
        result = await asyncio.to_thread(step.fn, *step.args, **step.kwargs)
    else:
        result = step.fn(*step.args, **step.kwargs)
    return (await result) if inspect.isawaitable(result) else result


def run(
    gen: Gen[T],
    *,
    refuse: Callable[[Call], Exception] = _refused,
    passthrough: tuple[type[BaseException], ...] = (),
) -> T:
    """Run a generator of ``Call`` / ``Sleep`` requests to completion, synchronously.

    ``refuse`` makes the error for a call whose result is awaitable; it is raised in the
    caller, not thrown into the generator (a misuse the logic cannot recover from), as
    are exceptions of the ``passthrough`` types.
    """
    try:
        return drive(gen, lambda step: _perform(step, refuse), passthrough=(_Refusal, *passthrough))
    except _Refusal as refusal:
        raise refusal.error from None


async def arun(gen: Gen[T], *, passthrough: tuple[type[BaseException], ...] = ()) -> T:
    """The async twin of ``run``."""
    return await adrive(gen, aperform, passthrough=passthrough)


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
