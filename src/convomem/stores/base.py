"""The storage seam: where a session's log of messages lives.

A store holds the *log* of one session: every message, in order, append-only except for
``pop_item`` and ``clear_session``. It is modelled on the OpenAI Agents SDK session
protocol, so a backend is four methods:

- ``get_items(limit=None)``: the messages, oldest first; with ``limit``, only the newest
  ``limit`` of them (still oldest first).
- ``add_items(items)``: append messages, all or nothing: when it raises, nothing was
  stored.
- ``pop_item()``: remove and return the newest message (None when empty).
- ``clear_session()``: remove every message.

``Store`` is the sync protocol and ``AsyncStore`` its twin with the same names as
coroutines. ``ConversationMemory(store=...)`` takes either; it writes a message to the
store first and changes its view only once the store accepted it, so a failing store
never corrupts the view. ``InMemoryStore`` is the default. Persistent backends (SQLite,
Redis, Postgres) implement the same four methods; a retryable failure should raise
``convomem.errors.TransientError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from ..errors import ConfigError, InvalidMessage
from ..model import Message

__all__ = ["AsyncStore", "InMemoryStore", "Store", "check_items", "check_limit"]


@runtime_checkable
class Store(Protocol):
    """A session's message log (sync). See the module docstring for the contract."""

    def get_items(self, limit: int | None = None) -> list[Message]:
        """The messages oldest first; with ``limit`` only the newest ``limit``."""
        ...

    def add_items(self, items: Sequence[Message]) -> None:
        """Append messages; all or nothing."""
        ...

    def pop_item(self) -> Message | None:
        """Remove and return the newest message, or None when the log is empty."""
        ...

    def clear_session(self) -> None:
        """Remove every message."""
        ...


@runtime_checkable
class AsyncStore(Protocol):
    """The async twin of ``Store``: the same four methods, as coroutines."""

    async def get_items(self, limit: int | None = None) -> list[Message]:
        """The messages oldest first; with ``limit`` only the newest ``limit``."""
        ...

    async def add_items(self, items: Sequence[Message]) -> None:
        """Append messages; all or nothing."""
        ...

    async def pop_item(self) -> Message | None:
        """Remove and return the newest message, or None when the log is empty."""
        ...

    async def clear_session(self) -> None:
        """Remove every message."""
        ...


def check_limit(limit: object) -> int | None:
    """Validate a ``get_items`` limit: None or a non-negative integer."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ConfigError(f"limit={limit!r}: must be None or a non-negative integer")
    return limit


def check_items(items: object) -> list[Message]:
    """Validate what ``add_items`` is given: an iterable of ``Message`` (not one message)."""
    if isinstance(items, Message | str | bytes) or not isinstance(items, Iterable):
        raise InvalidMessage("items", items, "must be a sequence of Message")
    out = list(items)
    for i, m in enumerate(out):
        if not isinstance(m, Message):
            raise InvalidMessage(f"items[{i}]", m, f"must be a Message, not {type(m).__name__}")
    return out


class InMemoryStore:
    """A ``Store`` in a Python list: the default, lost when the process ends.

    ``InMemoryStore(messages)`` starts with a copy of ``messages``. Messages are
    immutable, so the store hands out the objects it holds.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Message] = ()) -> None:
        self._items: list[Message] = check_items(items)

    def get_items(self, limit: int | None = None) -> list[Message]:
        n = check_limit(limit)
        if n is None:
            return list(self._items)
        return self._items[max(0, len(self._items) - n) :] if n else []

    def add_items(self, items: Sequence[Message]) -> None:
        self._items.extend(check_items(items))  # checked whole before anything is added

    def pop_item(self) -> Message | None:
        return self._items.pop() if self._items else None

    def clear_session(self) -> None:
        self._items.clear()

    def truncate(self, keep: int) -> None:
        """Keep only the oldest ``keep`` items, atomically (an optional Store method that
        ``ConversationMemory.clear(keep_system=True)`` uses when a store has it)."""
        del self._items[keep:]

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"<InMemoryStore {len(self._items)} messages>"
