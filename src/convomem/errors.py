"""The exception hierarchy: everything convomem raises on purpose is a ConvomemError."""

from __future__ import annotations

import reprlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import Message


class ConvomemError(Exception):
    """Root of every error convomem raises on purpose."""


class InvalidMessage(ConvomemError, ValueError):
    """A message (or one of its fields) is malformed; names the field and the value."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"{field}={value!r}: {problem}")


class ConfigError(ConvomemError, ValueError):
    """An option passed to a convomem object is invalid."""


class TransientError(ConvomemError):
    """A retryable failure of a store or service (a timeout, a dropped connection)."""


class HistoryLoadError(ConvomemError):
    """Loading a paginated history stopped early.

    ``messages`` holds every message loaded before the failure and ``cursor`` the
    cursor to resume from (pass it back as ``load_history(fetch_page, cursor=...)``).
    """

    def __init__(self, message: str, *, messages: list[Message], cursor: str | None) -> None:
        super().__init__(message)
        self.messages = messages
        self.cursor = cursor


class TokenizerError(ConvomemError, ValueError):
    """A tokenizer spec is unknown, or a message cannot be counted by the tokenizer."""


class MissingDependency(ConvomemError, ImportError):
    """An optional capability needs an extra that is not installed."""

    def __init__(self, what: str, extra: str, module: str) -> None:
        self.extra = extra
        super().__init__(
            f"{what} needs the optional dependency {module!r}; "
            f"install it with: pip install 'convomem[{extra}]'"
        )


class SummarizerError(ConvomemError):
    """A summarizer failed (or returned something that is not a summary).

    Raised by a fold of ``RunningSummary`` when the summarizer and its fallback both
    failed: the fold was aborted and the running summary is exactly as it was before.
    ``errors`` holds the underlying exceptions, oldest first.
    """

    def __init__(self, message: str, *, errors: tuple[BaseException, ...] = ()) -> None:
        super().__init__(message)
        self.errors = errors


class NotAMessage(InvalidMessage, TypeError):
    """Something that is not a ``Message`` was given where a message is required."""


class InvalidPage(ConvomemError, TypeError):
    """``fetch_page`` returned something that is not a ``(list of Message, cursor)`` tuple.

    ``page`` is the 1-based number of the page, ``cursor`` the cursor it was fetched
    with, ``field`` and ``value`` the part that is wrong.
    """

    def __init__(self, page: int, cursor: str | None, field: str, value: Any, problem: str):
        self.page = page
        self.cursor = cursor
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(
            f"page {page} (fetch_page({cursor!r})): {field}={_short_repr.repr(value)}: {problem}"
        )


class EmbeddingError(ConvomemError, ValueError):
    """An embedder returned something that is not a usable vector, or got bad input."""


class AsyncInSyncError(ConvomemError, RuntimeError):
    """Something async (a summarizer, an embedder, a store) was called from synchronous
    code inside a running event loop; use the async twin of the call."""


class AsyncSummarizerError(AsyncInSyncError):
    """A coroutine summarizer was called from synchronous code inside a running loop."""


class InputError(ConvomemError):
    """A conversation file cannot be read; the message names the position."""


_short_repr = reprlib.Repr()
_short_repr.maxstring = 60
_short_repr.maxother = 60
_short_repr.maxlist = _short_repr.maxtuple = 4


class OverBudget(ConvomemError):
    """A pack with ``strict=True`` does not fit: it is over budget, or a pinned message
    could not be sent. ``result`` is the ``PackResult`` (``result.explain()`` says why)."""

    def __init__(self, result: Any) -> None:
        self.result = result
        problems = "; ".join(result.problems()) or "it does not fit"
        super().__init__(
            f"packed {result.token_count:,} tokens for a budget of {result.budget:,}: "
            f"{problems} (see .result.explain())"
        )


class StoreError(ConvomemError):
    """A durable store failed for a reason that retrying will not fix (the file is not a
    database, the schema is newer than this version, the disk is full)."""


class ConcurrentUpdate(StoreError):
    """A compare-and-set lost: another writer moved the session first.

    ``field`` is ``"seq"`` (``append(..., expected_seq=)``) or ``"state_version"``
    (``save_state(..., expected_version=)``); ``expected`` is what the caller passed and
    ``actual`` what is stored now. Nothing was written: re-read and try again.
    """

    def __init__(self, session_id: str, field: str, expected: int, actual: int) -> None:
        self.session_id = session_id
        self.field = field
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"session {session_id!r}: {field} is {actual}, not the expected {expected}; "
            "another writer moved the session (nothing was written; re-read and retry)"
        )


class MessageConflict(StoreError, ValueError):
    """An append re-sent a message id the session already stores with other content.

    ``seq`` is where the stored message is. Nothing of the batch was written.
    """

    def __init__(self, session_id: str, message_id: str, seq: int, problem: str) -> None:
        self.session_id = session_id
        self.message_id = message_id
        self.seq = seq
        super().__init__(
            f"session {session_id!r}: message id {message_id!r} (seq {seq}): {problem}"
        )


class CorruptRecord(StoreError):
    """A stored message cannot be read back; names the session and the seq.

    The valid rows are never hidden: ``messages`` holds every valid message the read
    covered (oldest first, or in the page's order), ``seqs`` every unreadable seq, and
    ``cursor`` (for a page) where to resume past the page.
    """

    def __init__(
        self,
        session_id: str,
        seqs: list[int],
        problem: str,
        *,
        messages: list[Message],
        cursor: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.seq = seqs[0]
        self.seqs = seqs
        self.messages = messages
        self.cursor = cursor
        more = f" (and {len(seqs) - 1} more unreadable rows)" if len(seqs) > 1 else ""
        super().__init__(
            f"session {session_id!r}: the message at seq {seqs[0]} cannot be read: {problem}"
            f"{more}; the {len(messages)} valid messages are in .messages"
        )


class SessionOwnerMismatch(StoreError, PermissionError):
    """A session was opened for a user who does not own it (nothing was read or written)."""

    def __init__(self, session_id: str, tenant: str | None, user_id: str | None) -> None:
        self.session_id = session_id
        self.tenant = tenant
        self.user_id = user_id
        super().__init__(
            f"session {session_id!r} (tenant {tenant!r}) is not owned by user_id={user_id!r}"
        )
