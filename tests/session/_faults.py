"""Fault injection for session tests: stores and summarizers that fail on demand.

- ``StoreFaults``: which store methods fail, and when. ``down`` methods fail on every
  call; ``arm(method, after)`` makes one call fail after ``after`` successful ones (to
  break an operation half-way: the third ``pop_item`` of a ``clear``). A failing call
  raises ``TransientError`` *before* touching the store (the ``Store`` contract:
  ``add_items`` is all or nothing). ``suspended()`` turns the faults off while a test
  reads the true state; ``fired`` counts the failures raised.
- ``FaultyStore`` / ``FaultyTruncatingStore`` / ``AsyncFaultyStore``: a wrapper around
  any ``Store`` with those faults (the truncating one also offers the optional
  ``truncate(keep)``; the async one yields to the loop before every call, like real I/O).
- ``Tally``: the messages each *successful* summarizer call received, by id and by kind
  of call (``fold`` or ``compress``; merges of summary segments are counted apart).
- ``FlakySummarizer`` (sync), ``SlowSummarizer`` (async, yields to the loop several
  times), ``FlakyExtractive`` (the default extractive summarizer): fail while ``down``
  with an error whose text (``DOWN_TEXT``) must never reach a context.
- ``CountingSummary``: a ``RunningSummary`` that tells its ``Tally`` which kind of call
  (fold or compress) its summarizers are serving.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from convomem.errors import TransientError
from convomem.model import Message
from convomem.stores import InMemoryStore, Store
from convomem.summaries import SEGMENT_KEY, ExtractiveSummarizer, RunningSummary, Summary

DOWN_TEXT = "SUMMARIZER-DOWN upstream 503"
"""The text of a failing summarizer's error: a context must never contain it."""

STORE_METHODS = ("get_items", "add_items", "pop_item", "clear_session", "truncate")


class StoreFaults:
    """Which store methods fail, and when (see the module docstring)."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.armed: dict[str, int] = {}
        self.fired = 0
        self._suspended = 0

    def arm(self, method: str, after: int = 0) -> None:
        """Make one call of ``method`` fail, after ``after`` calls that succeed."""
        self.armed[method] = after

    def heal(self) -> None:
        """Nothing fails any more."""
        self.down.clear()
        self.armed.clear()

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """No fault fires inside this block (and armed counts do not move)."""
        self._suspended += 1
        try:
            yield
        finally:
            self._suspended -= 1

    def check(self, method: str) -> None:
        """Raise ``TransientError`` if ``method`` fails now."""
        if self._suspended:
            return
        if method in self.down:
            self.fired += 1
            raise TransientError(f"{method}: the store is down")
        left = self.armed.get(method)
        if left is None:
            return
        if left == 0:
            del self.armed[method]
            self.fired += 1
            raise TransientError(f"{method}: connection reset")
        self.armed[method] = left - 1


class FaultyStore:
    """A ``Store`` around ``inner`` whose methods fail as ``faults`` say."""

    def __init__(self, inner: Store | None = None, faults: StoreFaults | None = None) -> None:
        self.inner: Store = InMemoryStore() if inner is None else inner
        self.faults = StoreFaults() if faults is None else faults

    def items(self) -> list[Message]:
        """The true log, read past the faults."""
        with self.faults.suspended():
            return self.inner.get_items()

    def get_items(self, limit: int | None = None) -> list[Message]:
        self.faults.check("get_items")
        return self.inner.get_items(limit)

    def add_items(self, items: Sequence[Message]) -> None:
        self.faults.check("add_items")
        self.inner.add_items(items)

    def pop_item(self) -> Message | None:
        self.faults.check("pop_item")
        return self.inner.pop_item()

    def clear_session(self) -> None:
        self.faults.check("clear_session")
        self.inner.clear_session()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {len(self.items())} messages>"


class FaultyTruncatingStore(FaultyStore):
    """A ``FaultyStore`` that also offers the optional atomic ``truncate(keep)``."""

    def truncate(self, keep: int) -> None:
        self.faults.check("truncate")
        own = getattr(self.inner, "truncate", None)
        if callable(own):
            own(keep)
            return
        items = self.inner.get_items()
        self.inner.clear_session()
        self.inner.add_items(items[:keep])


class AsyncFaultyStore:
    """The ``AsyncStore`` twin of ``FaultyStore``: each call yields to the loop first."""

    def __init__(self, inner: Store | None = None, faults: StoreFaults | None = None) -> None:
        self._sync = FaultyStore(inner, faults)
        self.inner = self._sync.inner
        self.faults = self._sync.faults

    def items(self) -> list[Message]:
        return self._sync.items()

    async def get_items(self, limit: int | None = None) -> list[Message]:
        await asyncio.sleep(0)
        return self._sync.get_items(limit)

    async def add_items(self, items: Sequence[Message]) -> None:
        await asyncio.sleep(0)
        self._sync.add_items(items)

    async def pop_item(self) -> Message | None:
        await asyncio.sleep(0)
        return self._sync.pop_item()

    async def clear_session(self) -> None:
        await asyncio.sleep(0)
        self._sync.clear_session()

    def __repr__(self) -> str:
        return f"<AsyncFaultyStore {len(self.items())} messages>"


# -- summarizers ----------------------------------------------------------------------


class Tally:
    """What successful summarizer calls received: ``(kind, message id) -> calls``."""

    def __init__(self) -> None:
        self.op = "fold"
        self.counts: Counter[tuple[str, str]] = Counter()
        self.merges = 0
        self.calls = 0

    def record(self, messages: Sequence[Message]) -> None:
        self.calls += 1
        if any(SEGMENT_KEY in m.metadata for m in messages):
            self.merges += 1  # summary text re-summarized: not a message summarized again
            return
        for m in messages:
            self.counts[self.op, m.id] += 1

    def twice(self) -> list[tuple[str, str, int]]:
        """``(kind, id, calls)`` of every message summarized more than once."""
        return sorted((k, i, n) for (k, i), n in self.counts.items() if n > 1)

    def reset(self) -> None:
        """Forget the counts (the log was cleared: its ids may come back)."""
        self.counts.clear()


def _digest(messages: Sequence[Message], previous: Summary | None) -> str:
    head = "" if previous is None else previous.text[:60] + " | "
    parts = [f"{m.role}: {' '.join(m.text().split()[:6])}" for m in messages[:4]]
    return head + f"[{len(messages)} messages] " + "; ".join(parts)


class FlakySummarizer:
    """A sync summarizer that fails while ``down``; records its successful calls."""

    def __init__(self, tally: Tally, name: str = "flaky") -> None:
        self.tally = tally
        self.name = name
        self.down = False
        self.failures = 0

    def _fail(self) -> None:
        self.failures += 1
        raise RuntimeError(f"{DOWN_TEXT} ({self.name})")

    def __call__(self, messages: Sequence[Message], previous: Summary | None) -> str:
        if self.down:
            self._fail()
        self.tally.record(messages)
        return _digest(messages, previous)


class SlowSummarizer(FlakySummarizer):
    """An async summarizer that yields to the loop ``delay`` times before answering."""

    def __init__(self, tally: Tally, name: str = "slow", delay: int = 3) -> None:
        super().__init__(tally, name)
        self.delay = delay

    async def __call__(  # type: ignore[override]
        self, messages: Sequence[Message], previous: Summary | None
    ) -> str:
        for _ in range(self.delay):
            await asyncio.sleep(0)
        if self.down:
            self._fail()
        self.tally.record(messages)
        return _digest(messages, previous)


class FlakyExtractive(ExtractiveSummarizer):
    """The extractive summarizer (so a memory compresses with its own default), failing
    while ``down`` and recording its successful calls."""

    def __init__(self, tally: Tally, max_tokens: int = 64, name: str = "extractive") -> None:
        super().__init__(max_tokens)
        self.tally = tally
        self.name = name
        self.down = False
        self.failures = 0

    def __call__(self, messages: Sequence[Message], previous: Summary | None = None) -> str:
        if self.down:
            self.failures += 1
            raise RuntimeError(f"{DOWN_TEXT} ({self.name})")
        text = super().__call__(messages, previous)
        self.tally.record(messages)
        return text


class CountingSummary(RunningSummary):
    """A ``RunningSummary`` that sets ``tally.op`` to the kind of call being served."""

    def __init__(self, tally: Tally, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tally = tally

    @contextlib.contextmanager
    def _serving(self, op: str) -> Iterator[None]:
        before, self.tally.op = self.tally.op, op
        try:
            yield
        finally:
            self.tally.op = before

    def fold(self, messages: Any, **kwargs: Any) -> Any:
        with self._serving("fold"):
            return super().fold(messages, **kwargs)

    async def afold(self, messages: Any, **kwargs: Any) -> Any:
        with self._serving("fold"):
            return await super().afold(messages, **kwargs)

    def compress(self, messages: Any, **kwargs: Any) -> Any:
        with self._serving("compress"):
            return super().compress(messages, **kwargs)

    async def acompress(self, messages: Any, **kwargs: Any) -> Any:
        with self._serving("compress"):
            return await super().acompress(messages, **kwargs)
