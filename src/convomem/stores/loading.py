"""Paginated loading: pull a conversation's history from a store, page by page.

A store is a function ``fetch_page(cursor) -> (messages, next_cursor)``: the first call
passes ``None``; a ``None`` cursor or an empty page means there is nothing more; it may
raise :class:`~convomem.errors.TransientError`. Every rule of a load lives in one
sans-I/O state machine, ``_load_plan._Loader`` (cursor-loop detection, the page budget,
duplicate ids, validation, progress) and the shared :class:`~convomem.retry.RetryPolicy`
(when to retry and how long to wait); the sync and async drivers here only call
``fetch_page`` and sleep, so the twins cannot drift apart.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import TypeAlias

from ..errors import InvalidPage as InvalidPage  # re-exported (imported from here)
from ..model import Message
from ..retry import RetryPolicy, Uniform
from ._load_plan import LoadProgress, _Loader

__all__ = [
    "AsyncFetchPage",
    "FetchPage",
    "LoadProgress",
    "Page",
    "aiter_history",
    "aload_history",
    "iter_history",
    "load_history",
]

Page: TypeAlias = tuple[Sequence[Message], str | None]
"""What a store returns: the page's messages, oldest first, and the next cursor."""
FetchPage: TypeAlias = Callable[[str | None], Page]
AsyncFetchPage: TypeAlias = Callable[[str | None], Awaitable[Page]]


# -- sync driver ---------------------------------------------------------------------


def _run(
    fetch_page: FetchPage, loader: _Loader, sleep: Callable[[float], object]
) -> Iterator[list[Message]]:
    while loader.more():
        try:
            result = fetch_page(loader.cursor)
        except Exception as error:
            delay = loader.failed(error)
            if delay is None:
                raise
            sleep(delay)
            continue
        new = loader.accept(result)
        if new and not loader.collect:  # load_history reads loader.messages instead
            yield list(new)  # a copy: never hand out the store's own list


def iter_history(
    fetch_page: FetchPage,
    *,
    cursor: str | None = None,
    max_pages: int = 100_000,
    retries: int = 3,
    base_delay: float = 0.05,
    max_delay: float = 2.0,
    sleep: Callable[[float], object] = time.sleep,
    rng: Uniform | None = None,
    retry: RetryPolicy | None = None,
    on_page: Callable[[LoadProgress], object] | None = None,
) -> Iterator[list[Message]]:
    """Stream a paginated history: yield each page's new messages (a non-empty list,
    oldest first) as soon as the page arrives, fetching the next page only when asked.

    The rules are those of :func:`load_history`. The options are checked at call time.
    Messages are not retained, so a ``HistoryLoadError`` raised while iterating has
    empty ``.messages`` (everything loaded was already yielded) and the ``.cursor`` to
    resume from.
    """
    loader = _Loader(
        fetch_page,
        cursor=cursor,
        max_pages=max_pages,
        retries=retries,
        base_delay=base_delay,
        max_delay=max_delay,
        sleep=sleep,
        rng=rng,
        on_page=on_page,
        retry=retry,
        collect=False,
    )
    return _run(fetch_page, loader, sleep)


def load_history(
    fetch_page: FetchPage,
    *,
    cursor: str | None = None,
    max_pages: int = 100_000,
    retries: int = 3,
    base_delay: float = 0.05,
    max_delay: float = 2.0,
    sleep: Callable[[float], object] = time.sleep,
    rng: Uniform | None = None,
    retry: RetryPolicy | None = None,
    on_page: Callable[[LoadProgress], object] | None = None,
) -> list[Message]:
    """Load every page of a history; return its messages in order, each id once.

    - Starts at ``cursor`` (``None``: the beginning); stops at a ``None`` cursor or an
      empty page (the seed's rule: an empty page ends the history even when it comes
      with a cursor; that end is logged at INFO on the ``convomem.stores.loading``
      logger, a normal end at DEBUG). A cursor that was already fetched ends the load
      with a WARNING there, so a misbehaving store cannot loop forever.
    - After ``max_pages`` pages with more to load, raises ``HistoryLoadError``.
    - Failures of ``fetch_page`` follow one :class:`~convomem.retry.RetryPolicy`, per
      page: ``retry=RetryPolicy(...)``, or the shorthands, which build
      ``RetryPolicy(stop=stop_after_attempt(retries + 1),
      wait=wait_full_jitter(base_delay, max=max_delay), rng=rng)``: a ``TransientError``
      is retried up to ``retries`` times, sleeping
      ``rng.uniform(0, min(max_delay, base_delay * 2**attempt))`` before retry
      ``attempt`` (0-based). A page is added only once its call succeeded. When the
      policy stops retrying, raises ``HistoryLoadError`` with the messages loaded so far
      (``.messages``) and the cursor to resume from (``.cursor``), chained to the last
      error.
    - A message whose id was already loaded is dropped (the first occurrence is kept).
    - An error the policy does not retry, and ``InvalidPage`` for a malformed result,
      propagate at once.
    - ``on_page`` receives a :class:`LoadProgress` after each successful page.
    """
    loader = _Loader(
        fetch_page,
        cursor=cursor,
        max_pages=max_pages,
        retries=retries,
        base_delay=base_delay,
        max_delay=max_delay,
        sleep=sleep,
        rng=rng,
        on_page=on_page,
        retry=retry,
        collect=True,
    )
    for _ in _run(fetch_page, loader, sleep):
        pass
    return loader.messages


# -- async driver --------------------------------------------------------------------


async def _arun(
    fetch_page: AsyncFetchPage, loader: _Loader, sleep: Callable[[float], Awaitable[object]]
) -> AsyncIterator[list[Message]]:
    while loader.more():
        try:
            pending = fetch_page(loader.cursor)
        except Exception as error:
            delay = loader.failed(error)
            if delay is None:
                raise
            await sleep(delay)
            continue
        if not inspect.isawaitable(pending):
            raise loader.invalid(
                "result", pending, "is not awaitable; use load_history / iter_history"
            )
        try:
            result = await pending
        except Exception as error:
            delay = loader.failed(error)
            if delay is None:
                raise
            await sleep(delay)
            continue
        new = loader.accept(result)
        if new and not loader.collect:  # load_history reads loader.messages instead
            yield list(new)  # a copy: never hand out the store's own list


def aiter_history(
    fetch_page: AsyncFetchPage,
    *,
    cursor: str | None = None,
    max_pages: int = 100_000,
    retries: int = 3,
    base_delay: float = 0.05,
    max_delay: float = 2.0,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    rng: Uniform | None = None,
    retry: RetryPolicy | None = None,
    on_page: Callable[[LoadProgress], object] | None = None,
) -> AsyncIterator[list[Message]]:
    """The async twin of :func:`iter_history`: ``fetch_page`` and ``sleep`` are awaited.

    Use as ``async for page in aiter_history(fetch_page): ...``.
    """
    loader = _Loader(
        fetch_page,
        cursor=cursor,
        max_pages=max_pages,
        retries=retries,
        base_delay=base_delay,
        max_delay=max_delay,
        sleep=sleep,
        rng=rng,
        on_page=on_page,
        retry=retry,
        collect=False,
    )
    return _arun(fetch_page, loader, sleep)


async def aload_history(
    fetch_page: AsyncFetchPage,
    *,
    cursor: str | None = None,
    max_pages: int = 100_000,
    retries: int = 3,
    base_delay: float = 0.05,
    max_delay: float = 2.0,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    rng: Uniform | None = None,
    retry: RetryPolicy | None = None,
    on_page: Callable[[LoadProgress], object] | None = None,
) -> list[Message]:
    """The async twin of :func:`load_history`: ``fetch_page`` and ``sleep`` are awaited."""
    loader = _Loader(
        fetch_page,
        cursor=cursor,
        max_pages=max_pages,
        retries=retries,
        base_delay=base_delay,
        max_delay=max_delay,
        sleep=sleep,
        rng=rng,
        on_page=on_page,
        retry=retry,
        collect=True,
    )
    async for _ in _arun(fetch_page, loader, sleep):
        pass
    return loader.messages
