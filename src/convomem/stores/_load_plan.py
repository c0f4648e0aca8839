"""The rules of a paginated load, with no I/O (the drivers are in ``loading``).

:class:`_Loader` is the sans-I/O state machine of one load: cursor-loop detection, the
page budget, duplicate ids, validation of each page, progress reports, and the retry
policy (when to retry and how long to wait). ``loading``'s sync and async drivers only
call ``fetch_page`` and sleep, so the twins cannot drift apart.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .. import _check
from ..errors import ConfigError, HistoryLoadError, InvalidPage, TransientError, bounded_repr
from ..model import Message
from ..retry import (
    RetryAttempts,
    RetryPolicy,
    retry_if_exception_type,
    stop_after_attempt,
    wait_full_jitter,
)

# The public module's logger: what a load logs is ``loading``'s, wherever its rules live.
log = logging.getLogger("convomem.stores.loading")

# The slot descriptor's getter: raises TypeError for anything that is not a Message.
_message_id: Final[Callable[[Message], str]] = Message.__dict__["id"].__get__


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
            raise ConfigError(f"retry={bounded_repr(retry)}: must be a RetryPolicy or None")
        changed = [k for k, v in given.items() if v is not _DEFAULTS[k] and v != _DEFAULTS[k]]
        if changed:
            raise ConfigError(
                f"{changed[0]}={bounded_repr(given[changed[0]])}: pass either "
                "retry=RetryPolicy(...) or the retries/base_delay/max_delay/rng shorthands, "
                "not both"
            )
        return retry
    n = _check.non_negative_int("retries", retries)
    base = _check.number("base_delay", base_delay, minimum=0.0)
    cap = _check.number("max_delay", max_delay, minimum=0.0)
    if rng is not None and not callable(getattr(rng, "uniform", None)):
        raise ConfigError(f"rng={bounded_repr(rng)}: must have a uniform(a, b) method")
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
            raise ConfigError(f"cursor={bounded_repr(cursor)}: must be a string or None")
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
                f"{len(self._ids)} messages loaded, "
                f"resume with cursor={bounded_repr(self.cursor)}",
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
            f"fetch_page({bounded_repr(self.cursor)}) failed {decision.attempt} times "
            f"(last error: {bounded_repr(error)}); {len(self._ids)} messages loaded, "
            f"resume with cursor={bounded_repr(self.cursor)}",
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
