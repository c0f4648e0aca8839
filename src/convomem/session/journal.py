"""The log as a session engine sees it: a plain ``Store`` or a durable ``SessionStore``.

The engine never calls a store itself: it asks its journal, whose operations are
generators of ``_io.Call`` requests, so the sync and async drivers run the same code
over a sync or an async store. Two journals, one set of operations:

- ``PlainJournal`` over the four ``Store`` methods (``truncate`` too when the store has
  it). It keeps what such a store cannot tell: the ids in the log. Nothing derived is
  stored; a memory over a plain store rebuilds its view by replaying the log.
- ``DurableJournal`` over a ``SessionStore`` / ``AsyncSessionStore``: seqs, idempotent
  appends with ``expected_seq``, derived state beside the log (compare-and-set on its
  version), token counts.

What the engine does differently for them is said by two flags: ``durable`` (the append
carries the derived state, so it is made after the view changed tentatively; a plain
append is made first) and ``idempotent`` (a re-sent id is a no-op for the store to judge,
not an error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .._io import Gen, call
from ..errors import ClearIncomplete, ConcurrentUpdate, InvalidMessage
from ..model import Message
from ..retry import RetryPolicy, retry_if_exception_type, stop_after_attempt, wait_full_jitter
from ..stores import check_items, check_limit
from ..stores.database import AsyncSessionStore, LogEntry, SessionStore

PAGE: Final = 1000
"""Rows per page when a resume reads the log."""
RACES: Final = RetryPolicy(
    stop=stop_after_attempt(64),
    wait=wait_full_jitter(0.002, max=0.25),
    retry=retry_if_exception_type(ConcurrentUpdate),
)
"""Lost races (another writer moved the session first) one operation survives: writers
that keep colliding on one session spread out over a window that doubles from 2 ms up
to 250 ms (full jitter) instead of re-reading and colliding again."""


def is_session_store(store: object) -> bool:
    """Whether ``store`` is a durable session (it can hold derived state)."""
    return isinstance(store, SessionStore | AsyncSessionStore)


class PlainJournal:
    """A plain ``Store`` (see the module docstring)."""

    durable: Final = False
    idempotent: Final = False

    def __init__(self, store: Any) -> None:
        self.store = store
        self.ids: set[str] = set()

    @property
    def session_id(self) -> str:
        return str(getattr(self.store, "session_id", "default"))

    def read_state(self) -> Gen[tuple[dict[str, Any] | None, int]]:
        """No derived state is kept in a plain store."""
        yield from ()
        return None, 0

    def last_seq(self) -> Gen[int]:
        yield from ()
        return len(self.ids)

    def read_from(self, cut: int, last: int) -> Gen[list[LogEntry]]:
        return (yield from self.read_all())

    def read_all(self) -> Gen[list[LogEntry]]:
        """The log, oldest first, each message numbered by its position."""
        items = check_items((yield call(self.store.get_items)))
        seen: set[str] = set()
        entries: list[LogEntry] = []
        for i, m in enumerate(items):
            if not isinstance(m, Message):
                raise InvalidMessage(f"store item [{i}]", m, "must be a Message")
            if m.id in seen:
                raise InvalidMessage(f"store item [{i}].id", m.id, "appears twice in the log")
            seen.add(m.id)
            entries.append(LogEntry(i + 1, m))
        self.ids = seen
        return entries

    def existing(self, ids: Sequence[str]) -> Gen[set[str]]:
        """Which of ``ids`` the log holds."""
        yield from ()
        return {i for i in ids if i in self.ids}

    def append(
        self,
        messages: Sequence[Message],
        *,
        expected_seq: int,
        counts: Mapping[str, Mapping[str, int]] | None = None,
        state: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
    ) -> Gen[int]:
        """Add ``messages`` (one ``add_items``); the log's new length."""
        if expected_seq != len(self.ids):
            raise ConcurrentUpdate(self.session_id, "seq", expected_seq, len(self.ids))
        yield call(self.store.add_items, list(messages))
        self.ids.update(m.id for m in messages)
        return len(self.ids)

    def save_state(self, state: Mapping[str, Any] | None, expected_version: int) -> Gen[int]:
        yield from ()
        return expected_version

    def drop_state(self) -> Gen[None]:
        yield from ()

    def messages(self, limit: int | None) -> Gen[list[Message]]:
        items: list[Message] = check_items((yield call(self.store.get_items, check_limit(limit))))
        return items

    def pop(self) -> Gen[Message | None]:
        popped: Message | None = yield call(self.store.pop_item)
        if popped is not None:
            self.ids.discard(popped.id)
        return popped

    def clear(self, keep_system: bool) -> Gen[list[Message]]:
        """Empty the log but its leading system messages (kept when ``keep_system``),
        all or nothing; the messages kept.

        One atomic call when it can be (``clear_session``, or a store's optional
        ``truncate(keep)``); else the newest messages are popped one by one and, if the
        store fails half-way, put back before the error is raised. When putting them back
        fails too, ``ClearIncomplete`` says what the store holds.
        """
        items = check_items((yield call(self.store.get_items)))
        keep: list[Message] = []
        for m in items if keep_system else ():
            if m.role != "system":
                break
            keep.append(m)
        if not keep:
            yield call(self.store.clear_session)
        elif callable(getattr(self.store, "truncate", None)):
            yield call(self.store.truncate, len(keep))
        else:
            popped: list[Message] = []
            try:
                for _ in range(len(items) - len(keep)):
                    popped.append((yield call(self.store.pop_item)))
            except Exception as exc:
                removed = [m for m in reversed(popped) if m is not None]
                if removed:
                    try:
                        yield call(self.store.add_items, removed)
                    except Exception as again:
                        raise ClearIncomplete(len(items) - len(removed), removed, exc) from again
                raise
        self.ids = {m.id for m in keep}
        return keep


class DurableJournal(PlainJournal):
    """A ``SessionStore`` (see the module docstring): the plain operations, plus seqs,
    the derived state and idempotent appends."""

    durable: Final = True  # type: ignore[misc]
    idempotent: Final = True  # type: ignore[misc]

    def read_state(self) -> Gen[tuple[dict[str, Any] | None, int]]:
        raw, version = yield call(self.store.load_state)
        return raw, version

    def last_seq(self) -> Gen[int]:
        last: int = yield call(self.store.last_seq)
        return last

    def read_from(self, cut: int, last: int) -> Gen[list[LogEntry]]:
        """The log's entries from seq ``cut`` to the newest, oldest first."""
        out: list[LogEntry] = []
        cursor: str | None = None
        limit = max(1, min(PAGE, last - cut + 1))
        while True:
            page, cursor = yield call(self.store.entries, cursor, limit, True)
            out.extend(e for e in page if e.seq >= cut)
            if cursor is None or not page or page[-1].seq <= cut:
                break
            limit = PAGE
        out.reverse()
        return out

    def read_all(self) -> Gen[list[LogEntry]]:
        out: list[LogEntry] = []
        cursor: str | None = None
        while True:
            page, cursor = yield call(self.store.entries, cursor, PAGE, False)
            out.extend(page)
            if cursor is None or not page:
                return out

    def existing(self, ids: Sequence[str]) -> Gen[set[str]]:
        if not ids:
            return set()
        return set((yield call(self.store.get_counts, list(ids))))

    def append(
        self,
        messages: Sequence[Message],
        *,
        expected_seq: int,
        counts: Mapping[str, Mapping[str, int]] | None = None,
        state: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
    ) -> Gen[int]:
        """One atomic append of ``messages`` (and ``state``); the seq of the last one
        (see ``SessionStore.append``: a message stored with the same content is not
        stored again)."""
        kwargs: dict[str, Any] = {"expected_seq": expected_seq}
        if counts:
            kwargs["counts"] = counts
        if state is not None:
            kwargs["state"] = state
            kwargs["expected_version"] = expected_version
        got: int = yield call(self.store.append, list(messages), **kwargs)
        return got

    def replay(self, messages: Sequence[Message]) -> Gen[None]:
        """Send messages the log holds again (a no-op, or ``MessageConflict``)."""
        yield call(self.store.append, list(messages))

    def save_state(self, state: Mapping[str, Any] | None, expected_version: int) -> Gen[int]:
        version: int = yield call(self.store.save_state, state, expected_version=expected_version)
        return version

    def drop_state(self) -> Gen[None]:
        """Drop the stored state (after the log was cleared to its system prompt)."""

        def attempt() -> Gen[None]:
            raw, version = yield call(self.store.load_state)
            if raw is not None:
                yield call(self.store.save_state, None, expected_version=version)

        yield from RACES.retried(attempt)
