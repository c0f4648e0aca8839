"""The summaries a ``SummaryEvict`` remembers, keyed by the dropped messages themselves.

A strategy is often shared by every conversation a process serves, and ids are only
unique within a conversation (two users' histories both start with ``m1``). So an
entry is found by its ids (a cheap C-level comparison) *and* proven to stand for the
very same messages: the same objects (the common case, again C-level), or messages
equal in every field and content key. A cached text is therefore only ever served for
exactly the messages it summarizes, and a fold only ever extends a summary of exactly
the messages it starts with.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Final

from ..model import Message
from ..tokens import Tokenizer

ENTRIES: Final = 16  # dropped sets remembered (a strategy may serve a few sessions)
_ID: Final = attrgetter("id")


def same_messages(a: Sequence[Message], b: Sequence[Message]) -> bool:
    """True if ``a`` and ``b`` hold the same messages, in order.

    Identical objects are recognised at C level; a pair of distinct objects must agree
    in every field (``Message.__eq__``) and in its content key, so a summary is never
    served for messages that merely share ids.
    """
    if len(a) != len(b):
        return False
    if all(map(operator.is_, a, b)):
        return True
    pairs = zip(a, b, strict=True)
    return all(x is y or (x == y and x.content_key == y.content_key) for x, y in pairs)


@dataclass(slots=True)
class CachedSummary:
    """A summarizer's text for one dropped set, and the summary messages made of it.

    ``full`` is ``(tokenizer, message, cost)`` for the unclipped message (``message``
    None when the text is blank); ``clipped`` maps a room to the message clipped to it.
    """

    messages: tuple[Message, ...]
    ids: tuple[str, ...]
    text: str
    full: tuple[Tokenizer, Message | None, int] | None = None
    clipped: dict[int, tuple[Tokenizer, Message | None]] = field(default_factory=dict)


class SummaryCache:
    """The last ``size`` summaries, least recently used first out; thread-safe."""

    def __init__(self, size: int = ENTRIES) -> None:
        self.size = size
        self._entries: list[CachedSummary] = []  # oldest first
        self._last: CachedSummary | None = None  # the entry used last
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every summary."""
        with self._lock:
            self._entries.clear()
            self._last = None

    def get(self, messages: Sequence[Message]) -> CachedSummary | None:
        """The summary of exactly ``messages``, if cached."""
        n = len(messages)
        last = self._last
        if (
            last is not None
            and len(last.ids) == n
            and all(map(operator.is_, last.messages, messages))
        ):
            return last  # the common case: one C-level identity pass, no ids, no hash
        ids = tuple(map(_ID, messages))
        with self._lock:
            entries = self._entries
            for k in range(len(entries) - 1, -1, -1):
                e = entries[k]
                if len(e.ids) == n and _stands_for(e, ids, messages, n):
                    entries.append(entries.pop(k))
                    self._last = e
                    return e
        return None

    def longest_prefix(
        self, ids: tuple[str, ...], messages: Sequence[Message]
    ) -> CachedSummary | None:
        """The cached summary of the longest strict prefix of ``messages`` (ids ``ids``)."""
        n = len(ids)
        with self._lock:
            entries = [e for e in self._entries if 0 < len(e.ids) < n]
        entries.sort(key=lambda e: len(e.ids), reverse=True)
        for e in entries:
            k = len(e.ids)
            if e.ids[-1] == ids[k - 1] and _stands_for(e, ids, messages, k):
                return e
        return None

    def put(self, entry: CachedSummary) -> None:
        """Remember ``entry`` (the most recently used), forgetting the oldest if full."""
        with self._lock:
            entries = self._entries
            entries.append(entry)
            while len(entries) > self.size:
                entries.pop(0)
            self._last = entry


def _stands_for(
    entry: CachedSummary, ids: tuple[str, ...], messages: Sequence[Message], k: int
) -> bool:
    """Whether ``entry`` summarizes exactly the first ``k`` of ``messages`` (ids ``ids``).

    ``map`` stops at the shorter list, so the identity pass needs no slice; only
    messages that are not the very same objects cost a slice and field comparisons.
    """
    if len(entry.messages) != k:
        return False
    if all(map(operator.is_, entry.messages, messages)):
        return True
    if k == len(ids):
        return entry.ids == ids and same_messages(entry.messages, messages)
    return entry.ids == ids[:k] and same_messages(entry.messages, messages[:k])
