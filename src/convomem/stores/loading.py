"""Paginated loading: pull a conversation's history from a store, page by page.

A store is a function ``fetch_page(cursor) -> (messages, next_cursor)``: the first call
passes ``None``; a ``None`` cursor or an empty page means there is nothing more; it may
raise :class:`~convomem.errors.TransientError`. Every rule of a load lives in one
sans-I/O state machine, :class:`_Loader` (cursor-loop detection, the page budget,
duplicate ids, validation, progress) and the shared :class:`~convomem.retry.RetryPolicy`
(when to retry and how long to wait); the sync and async drivers only call
``fetch_page`` and sleep, so the twins cannot drift apart.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import reprlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from .. import _check
from ..errors import ConfigError, HistoryLoadError, InvalidPage, TransientError
from ..model import Message
from ..retry import (
    RetryAttempts,
    RetryPolicy,
    Uniform,
    retry_if_exception_type,
    stop_after_attempt,
    wait_full_jitter,
)

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

log = logging.getLogger(__name__)

Page: TypeAlias = tuple[Sequence[Message], str | None]
"""What a store returns: the page's messages, oldest first, and the next cursor."""
FetchPage: TypeAlias = Callable[[str | None], Page]
AsyncFetchPage: TypeAlias = Callable[[str | None], Awaitable[Page]]

# The slot descriptor's getter: raises TypeError for anything that is not a Message.
_message_id: Final[Callable[[Message], str]] = Message.__dict__["id"].__get__
_short_repr = reprlib.Repr()
_short_repr.maxstring = 60
_short_repr.maxother = 60
_short_repr.maxlist = _short_repr.maxtuple = 4


@dataclass(frozen=True, slots=True)
class LoadProgress:
    """What ``on_page`` receives after each page that was fetched successfully."""

    pages: int
    """Pages fetched successfully so far (this one included)."""
    loaded: int
    """Distinct messages loaded so far."""
    new: int
    """Messages this page added (its duplicates excluded)."""
    duplicates: int
    """Messages dropped so far because their id was already loaded."""
    retries: int
    """Transient failures retried so far."""
    cursor: str | None
    """The cursor this page was fetched with."""
    next_cursor: str | None
    """The cursor the store handed back (``None``: no more pages)."""
    done: bool
    """True when this page ended the load."""


_DEFAULTS: Final = {"retries": 3, "base_delay": 0.05, "max_delay": 2.0, "rng": None}


def _policy(
    retry: object, retries: object, base_delay: object, max_delay: object, rng: object
) -> RetryPolicy:
    """The retry policy of a load: ``retry`` itself, or one built from the shorthands."""
    given = {"retries": retries, "base_delay": base_delay, "max_delay": max_delay, "rng": rng}
    if retry is not None:
        if not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry={retry!r}: must be a RetryPolicy or None")
        changed = [k for k, v in given.items() if v is not _DEFAULTS[k] and v != _DEFAULTS[k]]
        if changed:
            raise ConfigError(
                f"{changed[0]}={given[changed[0]]!r}: pass either retry=RetryPolicy(...) or "
                "the retries/base_delay/max_delay/rng shorthands, not both"
            )
        return retry
    n = _check.non_negative_int("retries", retries)
    base = _check.number("base_delay", base_delay, minimum=0.0)
    cap = _check.number("max_delay", max_delay, minimum=0.0)
    if rng is not None and not callable(getattr(rng, "uniform", None)):
        raise ConfigError(f"rng={rng!r}: must have a uniform(a, b) method")
    return RetryPolicy(
        stop=stop_after_attempt(n + 1),
        wait=wait_full_jitter(base, max=cap),
        retry=retry_if_exception_type(TransientError),
        rng=rng,  # type: ignore[arg-type]
    )


def _first_occurrences(page: Sequence[Message], ids: list[str], seen: set[str]) -> list[Message]:
    """The messages of ``page`` whose id is not in ``seen``, each id once (adds to ``seen``)."""
    new: list[Message] = []
    for message, id_ in zip(page, ids, strict=True):
        if id_ not in seen:
            seen.add(id_)
            new.append(message)
    return new


class _Loader:
    """The rules of one load, with no I/O: a driver asks ``more()``, fetches
    ``cursor``, then reports the outcome with ``accept(result)`` or ``failed(error)``.

    With ``collect`` the loaded messages are kept in ``messages`` (``load_history``);
    without it they are only handed out (``iter_history``), so memory stays flat
    apart from the set of ids seen.
    """

    __slots__ = (
        "_attempts",
        "_cursors",
        "_done",
        "_duplicates",
        "_ids",
        "_max_pages",
        "_on_page",
        "_policy",
        "_retried",
        "collect",
        "cursor",
        "messages",
        "pages",
    )

    def __init__(
        self,
        fetch_page: Any,
        *,
        cursor: Any,
        max_pages: Any,
        retries: Any,
        base_delay: Any,
        max_delay: Any,
        sleep: Any,
        rng: Any,
        on_page: Any,
        collect: bool,
        retry: Any = None,
    ) -> None:
        _check.function("fetch_page", fetch_page, "cursor -> (messages, next_cursor)")
        if cursor is not None and not isinstance(cursor, str):
            raise ConfigError(f"cursor={cursor!r}: must be a string or None")
        self._max_pages = _check.positive_int("max_pages", max_pages)
        self._policy = _policy(retry, retries, base_delay, max_delay, rng)
        _check.function("sleep", sleep, "seconds -> None")
        if on_page is not None:
            _check.function("on_page", on_page, "LoadProgress -> None")
        self._on_page: Callable[[LoadProgress], object] | None = on_page
        self.collect = collect
        self.cursor: str | None = cursor
        self._cursors: set[str | None] = {cursor}
        self._ids: set[str] = set()
        self.messages: list[Message] = []
        self.pages = 0
        self._attempts: RetryAttempts | None = None  # the attempts of the page being fetched
        self._retried = 0
        self._duplicates = 0
        self._done = False

    def more(self) -> bool:
        """True if there is a page to fetch; raises once ``max_pages`` pages were fetched."""
        if self._done:
            return False
        if self.pages >= self._max_pages:
            raise HistoryLoadError(
                f"max_pages={self._max_pages} reached with more to load; "
                f"{len(self._ids)} messages loaded, resume with cursor={self.cursor!r}",
                messages=self.messages,
                cursor=self.cursor,
            )
        if self._attempts is None:
            self._attempts = self._policy.attempts()  # the page's clock starts now
        return True

    def failed(self, error: Exception) -> float | None:
        """Record a failed fetch. Returns the delay before retrying, or ``None`` when the
        error is not retryable (the driver re-raises it as it is); raises
        ``HistoryLoadError`` (chained to ``error``) when the policy stops retrying."""
        attempts = self._attempts
        if attempts is None:  # a failure outside more(): cannot happen with our drivers
            attempts = self._attempts = self._policy.attempts()
        decision = attempts.failed(error)
        if decision.retry:
            self._retried += 1
            return decision.delay
        if not decision.stopped:
            return None
        raise HistoryLoadError(
            f"fetch_page({self.cursor!r}) failed {decision.attempt} times "
            f"(last error: {error!r}); {len(self._ids)} messages loaded, "
            f"resume with cursor={self.cursor!r}",
            messages=self.messages,
            cursor=self.cursor,
        ) from error

    def invalid(self, field: str, value: Any, problem: str) -> InvalidPage:
        """The error for a bad result of the page being fetched."""
        return InvalidPage(self.pages + 1, self.cursor, field, value, problem)

    def _validate(self, result: object) -> tuple[Sequence[Message], str | None, list[str]]:
        """Check a result's shape; return its messages, next cursor and message ids."""
        if not isinstance(result, tuple) or len(result) != 2:
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()  # never awaited, on purpose: no RuntimeWarning
                raise self.invalid(
                    "result", result, "is awaitable; use aload_history / aiter_history"
                )
            raise self.invalid("result", result, "must be a (messages, next_cursor) tuple")
        page, next_cursor = result
        if type(page) is not list and (
            not isinstance(page, Sequence) or isinstance(page, str | bytes)
        ):
            raise self.invalid("messages", page, "must be a list of Message")
        if next_cursor is not None and not isinstance(next_cursor, str):
            raise self.invalid("next_cursor", next_cursor, "must be a string or None")
        try:
            # One C-level pass both type-checks the page and collects its ids.
            ids: list[str] = list(map(_message_id, page))
        except TypeError:
            for i, item in enumerate(page):
                if not isinstance(item, Message):
                    raise self.invalid(
                        f"messages[{i}]", item, f"must be a Message, not {type(item).__name__}"
                    ) from None
            raise
        return page, next_cursor, ids

    def accept(self, result: object) -> Sequence[Message]:
        """Add a successfully fetched page; return its new messages (first occurrences,
        possibly the page itself: copy before handing it out).

        A malformed result raises ``InvalidPage`` and leaves the state as it was.
        """
        page, next_cursor, ids = self._validate(result)
        seen = self._ids
        new: Sequence[Message] = page
        if seen.isdisjoint(ids):
            before = len(seen)
            seen.update(ids)
            if len(seen) - before != len(ids):  # repeats within the page
                new = _first_occurrences(page, ids, set())
        else:
            new = _first_occurrences(page, ids, seen)
        self._duplicates += len(page) - len(new)
        self.pages += 1
        self._attempts = None
        if self.collect:
            self.messages.extend(new)
        fetched_with = self.cursor
        if next_cursor is None:
            self._done = True
            log.debug(
                "fetch_page(%r) returned no next cursor: the load is complete after %d pages, "
                "%d messages",
                fetched_with,
                self.pages,
                len(seen),
            )
        elif not page:
            # The seed's rule: an empty page ends the history, whatever cursor comes with it.
            self._done = True
            log.info(
                "fetch_page(%r) returned an empty page (with next cursor %r): an empty page "
                "ends the load; %d pages, %d messages loaded",
                fetched_with,
                next_cursor,
                self.pages,
                len(seen),
            )
        elif next_cursor in self._cursors:
            log.warning(
                "fetch_page(%r) returned cursor %r, which was already fetched; "
                "ending the load after %d pages",
                fetched_with,
                next_cursor,
                self.pages,
            )
            self._done = True
        else:
            self._cursors.add(next_cursor)
            self.cursor = next_cursor
        if self._on_page is not None:
            self._on_page(
                LoadProgress(
                    pages=self.pages,
                    loaded=len(seen),
                    new=len(new),
                    duplicates=self._duplicates,
                    retries=self._retried,
                    cursor=fetched_with,
                    next_cursor=next_cursor,
                    done=self._done,
                )
            )
        return new


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
