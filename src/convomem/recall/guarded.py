"""``GuardedRecall``: recall that fails safely, so a conversation never waits on it.

Recall is an extra: when its backend is down or slow, the context is still assembled,
only without recalled snippets. ``GuardedRecall(index)`` wraps a ``RecallIndex`` (or
anything with its ``search``) and its ``search`` never raises for the backend's
failures; it answers a ``RecallOutcome`` instead:

- ``"ok"``: the hits;
- ``"failed"``: the backend raised an outage error (``OUTAGES``: ``TransientError``,
  ``StoreError``, ``EmbeddingError``, ``OSError``); no hits, ``error`` says what;
- ``"timeout"``: no answer within ``deadline`` seconds. The late search is abandoned (its
  result discarded; async: cancelled). Late searches cannot pile up: while ``max_late``
  of them are still running, a new search answers "timeout" at once, without calling
  the backend (which is stuck). Sync searches run on daemon threads, one per search in
  flight (the callers waiting and the late searches), reused once idle;
- ``"open"``: the circuit breaker (``retry.CircuitBreaker``) is open after repeated
  failures; the backend is not called at all until it lets a trial through.

The caller's own bugs still raise: a bad ``query``, ``user_id``, ``tenant`` or ``k`` is
checked before anything runs, and any other error from the backend (``ConfigError``, a
``TypeError``...) propagates (the backend answered, so the breaker counts it as up).

One WARNING is logged when an outage starts (the first search without recall) and one
INFO when it ends (the first "ok" after it), never one per call. ``AsyncGuardedRecall``
is the async twin over ``AsyncRecallIndex``; both share ``_Guard`` (every decision,
count and log line) and differ only in how they wait. Other attributes (``add``,
``submit``, ``flush``, ``delete``, ``erase_user``...) pass through to the index.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import queue
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, wait
from typing import Any

from .._io import is_async_callable
from ..errors import ConfigError, bounded_repr
from ..retry.breaker import CircuitBreaker
from ._backend import Hit
from ._guard import (
    OUTAGES,
    AsyncSearchable,
    RecallOutcome,
    RecallStatus,
    Searchable,
    _Guard,
    _Guarded,
    _Ticket,
)

__all__ = ["OUTAGES", "AsyncGuardedRecall", "GuardedRecall", "RecallOutcome", "RecallStatus"]


def _job(fn: Callable[[], list[Hit]], finish: Callable[[], None]) -> Callable[[], list[Hit]]:
    def run() -> list[Hit]:
        try:
            return fn()
        finally:
            finish()  # before the result is set, so the caller sees the search finished

    return run


class _Workers:
    """Daemon threads (a stuck search must not keep the process from exiting), one per
    search in flight: an idle thread is reused, a new one started only when none is."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[list[Hit]], Callable[[], list[Hit]]] | None]
        self._jobs = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for a job, minus the jobs queued for them
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], list[Hit]]) -> Future[list[Hit]]:
        with self._lock:
            if self._idle:
                self._idle -= 1
            else:
                t = threading.Thread(target=self._work, name="convomem-recall-guard", daemon=True)
                t.start()
                self._threads.append(t)
        fut: Future[list[Hit]] = Future()
        self._jobs.put((fut, fn))
        return fut

    @property
    def threads(self) -> int:
        with self._lock:
            return len(self._threads)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fut, fn = job
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except BaseException as exc:  # handed to the waiting caller
                    fut.set_exception(exc)
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """Stop the threads once their current search returns (without waiting)."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._jobs.put(None)


class GuardedRecall(_Guarded):
    """A ``RecallIndex`` whose ``search`` answers within ``deadline`` seconds and never
    raises for an outage; see the module docstring.

    ``breaker`` defaults to ``CircuitBreaker()`` (open after 5 failures in a row, a trial
    after 30 s); ``logger`` to ``logging.getLogger("convomem.recall")``; ``max_late`` is
    how many abandoned searches may still run before new ones answer "timeout" at once;
    ``deadline=None`` waits as long as the backend takes (in the caller's thread).
    """

    def __init__(
        self,
        index: Searchable,
        *,
        deadline: float | None = 0.25,
        breaker: CircuitBreaker | None = None,
        logger: logging.Logger | None = None,
        max_late: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not callable(getattr(index, "search", None)):
            raise ConfigError(f"index={bounded_repr(index)}: must have a search() method")
        self.index = index
        self._guard = _Guard(deadline, breaker, logger, max_late, clock)
        self._workers = _Workers()

    def search(
        self, query: str, *, user_id: str, tenant: str | None = None, k: int = 10, **kw: Any
    ) -> RecallOutcome:
        """``index.search(query, user_id=, tenant=, k=, **kw)`` within the deadline."""
        g = self._guard
        g.check(query, user_id, tenant, k)
        start = g.clock()
        ticket = g.admit(start)
        if isinstance(ticket, RecallOutcome):
            return ticket
        call = _job(
            lambda: self.index.search(query, user_id=user_id, tenant=tenant, k=k, **kw),
            lambda: g.finish(ticket),
        )
        try:
            hits = self._run(call, ticket)
        except OUTAGES as exc:
            return g.failed(exc, start)
        except Exception:
            g.answered_with_error()
            raise
        if hits is None:
            return g.timed_out(start)
        return g.succeeded(hits, start)

    def _run(self, call: Callable[[], list[Hit]], ticket: _Ticket) -> list[Hit] | None:
        """The hits; None when they are late (the search goes on, abandoned)."""
        g = self._guard
        if g.deadline is None:
            return call()
        try:
            fut = self._workers.submit(call)
        except BaseException:  # no thread to run it: it never started
            g.finish(ticket)
            raise
        try:
            done, _ = wait([fut], timeout=g.deadline)
        except BaseException:  # the caller was interrupted: the search goes on alone
            g.abandon(ticket)
            raise
        if done:
            return fut.result()
        g.abandon(ticket)
        return None

    def close(self) -> None:
        """Stop the workers (a stuck search is left to finish on its own) and close the
        index."""
        self._workers.close()
        close = getattr(self.index, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> GuardedRecall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncGuardedRecall(_Guarded):
    """The async twin of ``GuardedRecall`` over an ``AsyncRecallIndex``: the same
    options, outcomes, breaker and log lines. A late search is cancelled and abandoned
    (the answer does not wait for the cancellation to land); while ``max_late`` late
    searches have not stopped yet (a backend that ignores cancellation), new ones answer
    "timeout" at once."""

    def __init__(
        self,
        index: AsyncSearchable,
        *,
        deadline: float | None = 0.25,
        breaker: CircuitBreaker | None = None,
        logger: logging.Logger | None = None,
        max_late: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not callable(getattr(index, "search", None)):
            raise ConfigError(f"index={bounded_repr(index)}: must have a search() method")
        self.index = index
        self._guard = _Guard(deadline, breaker, logger, max_late, clock)

    async def search(
        self, query: str, *, user_id: str, tenant: str | None = None, k: int = 10, **kw: Any
    ) -> RecallOutcome:
        """``await index.search(query, user_id=, tenant=, k=, **kw)`` within the deadline."""
        g = self._guard
        g.check(query, user_id, tenant, k)
        start = g.clock()
        ticket = g.admit(start)
        if isinstance(ticket, RecallOutcome):
            return ticket
        try:
            hits = await self._run(
                lambda: self.index.search(query, user_id=user_id, tenant=tenant, k=k, **kw),
                ticket,
            )
        except OUTAGES as exc:
            return g.failed(exc, start)
        except Exception:
            g.answered_with_error()
            raise
        if hits is None:
            return g.timed_out(start)
        return g.succeeded(hits, start)

    async def _run(
        self, call: Callable[[], Awaitable[list[Hit]]], ticket: _Ticket
    ) -> list[Hit] | None:
        """The hits; None when they are late (the search is cancelled and abandoned)."""
        g = self._guard
        try:
            task: asyncio.Future[list[Hit]] = asyncio.ensure_future(call())
        except BaseException:  # search() raised before it was awaited
            g.finish(ticket)
            raise
        # A done callback, not a finally in the search: it runs even for a task cancelled
        # before it started, and (added first) before the waiter below wakes up.
        task.add_done_callback(lambda _: g.finish(ticket))
        try:
            if g.deadline is None:
                return await task
            done, _ = await asyncio.wait({task}, timeout=g.deadline)
        except asyncio.CancelledError:  # the caller was cancelled: so is its search
            task.cancel()
            g.abandon(ticket)
            task.add_done_callback(_discard)
            raise
        if done:
            return task.result()
        task.cancel()
        g.abandon(ticket)
        task.add_done_callback(_discard)
        return None

    async def aclose(self) -> None:
        """Close the index (``aclose()``)."""
        aclose = getattr(self.index, "aclose", None)
        if callable(aclose):
            await aclose()

    async def __aenter__(self) -> AsyncGuardedRecall:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _discard(task: asyncio.Future[Any]) -> None:
    """Read an abandoned search's outcome, so asyncio does not log it as unretrieved."""
    if not task.cancelled():
        task.exception()


_GUARDS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def guard_of(recall: Any) -> Any:
    """The guard a memory searches ``recall`` through: ``recall`` itself when it is a
    ``GuardedRecall`` / ``AsyncGuardedRecall``, else one guard per index (deadline,
    circuit breaker), shared by the memories using that index: one breaker per backend,
    and no memory starts worker threads of its own."""
    if isinstance(recall, GuardedRecall | AsyncGuardedRecall):
        return recall
    try:
        guard = _GUARDS.get(recall)
    except TypeError:  # not weakly referable: a guard of its own
        guard = None
    if guard is None:
        guard = (
            AsyncGuardedRecall(recall)
            if is_async_callable(recall.search)
            else GuardedRecall(recall)
        )
        with contextlib.suppress(TypeError):
            _GUARDS[recall] = guard
    return guard


def takes_neighbours(index: Any) -> bool:
    """Whether ``index.search`` accepts ``neighbours=`` (a custom index may not)."""
    try:
        params = inspect.signature(index.search).parameters
    except (TypeError, ValueError):
        return False
    return "neighbours" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
