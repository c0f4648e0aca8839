"""The exception hierarchy: everything convomem raises on purpose is a ConvomemError."""

from __future__ import annotations

import reprlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .model import Message


MAX_REPR: Final = 200
"""The longest value an error message shows (a 50 MB message must not flood a log)."""

_bounded = reprlib.Repr()
_bounded.maxstring = _bounded.maxother = _bounded.maxlong = MAX_REPR - 40
_bounded.maxlist = _bounded.maxtuple = _bounded.maxdict = 8
_bounded.maxset = _bounded.maxfrozenset = _bounded.maxdeque = _bounded.maxarray = 8
_bounded.maxlevel = 4


def bounded_repr(value: Any) -> str:
    """``repr(value)`` cut to at most ``MAX_REPR`` characters (``...`` marks the cut).

    Never raises: a value whose repr fails (or an int too long to print) shows its type.
    """
    try:
        text = _bounded.repr(value)
    except Exception:
        return f"<{type(value).__name__} object>"
    return text if len(text) <= MAX_REPR else text[: MAX_REPR - 3] + "..."


class ConvomemError(Exception):
    """Root of every error convomem raises on purpose."""


class InvalidMessage(ConvomemError, ValueError):
    """A message (or one of its fields) is malformed; names the field and the value."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        where = field if len(field) <= MAX_REPR else field[: MAX_REPR - 3] + "..."
        super().__init__(f"{where}={bounded_repr(value)}: {problem}")


class ConfigError(ConvomemError, ValueError):
    """An option passed to a convomem object is invalid."""


class TransientError(ConvomemError):
    """A retryable failure of a store or service (a timeout, a dropped connection)."""

    retry_after: float | None = None
    """The server's ``Retry-After`` hint in seconds (a 429 or 503 says when to come
    back), when it gave one; ``retry.wait_retry_after`` honours it."""


class ClearIncomplete(TransientError):
    """``clear(keep_system=True)`` on a store without ``truncate`` stopped half-way, and
    putting the popped messages back failed too: the store lost its newest messages.

    The store protocol has no atomic "keep the first n": such a clear pops the newest
    messages one by one and, when a pop fails, adds them back; when that add fails as
    well nothing more can be done. The store now holds the first ``remaining`` messages
    of the log; ``removed`` are the messages it no longer holds (oldest first). The
    memory's view follows the store (it is rebuilt from it on next use, like after
    ``pop``). Call ``clear()`` again to finish, or ``add_items(exc.removed)`` to restore.
    """

    def __init__(self, remaining: int, removed: list[Message], cause: BaseException) -> None:
        self.remaining = remaining
        self.removed = removed
        ids = bounded_repr([m.id for m in removed])
        super().__init__(
            f"clear(keep_system=True) stopped half-way ({cause}) and putting the popped "
            f"messages back failed: the store now holds the first {remaining} messages of "
            f"the log; the {len(removed)} newest ({ids}) are in .removed; call clear() "
            "again to finish, or add them back"
        )


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


class ExtractionError(SummarizerError):
    """A fact extractor failed or answered something that is not a list of facts (an
    ``LLMExtractor`` raises it only when it has no fallback)."""


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
            f"page {page} (fetch_page({bounded_repr(cursor)})): "
            f"{field}={_short_repr.repr(value)}: {problem}"
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
            f"session {bounded_repr(session_id)}: {field} is {actual}, "
            f"not the expected {expected}; "
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
            f"session {bounded_repr(session_id)}: message id {bounded_repr(message_id)} "
            f"(seq {seq}): {problem}"
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
            f"session {bounded_repr(session_id)}: the message at seq {seqs[0]} cannot be "
            f"read: {problem}"
            f"{more}; the {len(messages)} valid messages are in .messages"
        )


class SessionOwnerMismatch(StoreError, PermissionError):
    """A session was opened for a user who does not own it (nothing was read or written)."""

    def __init__(self, session_id: str, tenant: str | None, user_id: str | None) -> None:
        self.session_id = session_id
        self.tenant = tenant
        self.user_id = user_id
        super().__init__(
            f"session {bounded_repr(session_id)} (tenant {bounded_repr(tenant)}) is not owned "
            f"by user_id={bounded_repr(user_id)}"
        )


# -- the memory service (convomem.server) ------------------------------------------------


class ServiceProblem(ConvomemError):
    """An error the memory service answers as a problem document (RFC 9457):
    ``status``, a stable ``slug`` (the ``type`` URI's last part), ``detail``, and the
    ``field`` and ``value`` to blame when there is one (``convomem.server.problems``)."""

    def __init__(
        self,
        status: int,
        slug: str,
        detail: str,
        *,
        field: str | None = None,
        value: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.detail = detail
        self.field = field
        self.value = value
        self.headers = headers or {}


# -- the HTTP service, as its client sees it -----------------------------------------------


class ServiceError(ConvomemError):
    """The memory service answered with a problem (RFC 9457 problem details).

    ``status`` is the HTTP status; ``type``, ``title``, ``detail``, ``field`` (``""``
    when the problem names none) and ``value`` come from the problem document
    (``details`` holds it whole, extension members included). The subclasses also
    derive from the error a local call would raise (``NotFound`` is a ``LookupError``,
    ``SessionMoved`` a ``ConcurrentUpdate``...), so code written against a local store
    catches the remote failure the same way.
    """

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        self.status = status
        self.details = dict(problem)
        self.type = str(problem.get("type") or "about:blank")
        self.title = str(problem.get("title") or "")
        self.detail = str(problem.get("detail") or "")
        self.field: str = "" if problem.get("field") is None else str(problem["field"])
        self.value: Any = problem.get("value")
        where = f" (field {self.field}={bounded_repr(self.value)})" if self.field else ""
        text = self.detail or self.title or "the service gave no detail"
        # Exception.__init__ directly: the second bases' constructors take other arguments.
        Exception.__init__(self, f"HTTP {status} {self.type}: {text}{where}")


class RequestInvalid(ServiceError, InvalidMessage):
    """The service rejected the request's input (400, 413, 422): ``field`` and ``value``
    name what was wrong; nothing was written."""

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        super().__init__(status, problem)
        self.problem = self.detail or self.title


class Unauthorized(ServiceError, PermissionError):
    """The API key is missing, unknown or revoked (401), or not allowed (403)."""


class NotFound(ServiceError, LookupError):
    """No such session, user or route for this key's tenant (404)."""


class SessionMoved(ServiceError, ConcurrentUpdate):
    """``If-Match`` named a seq the session has moved past (409); nothing was written.

    ``expected`` / ``actual`` are the seqs from the problem (``-1`` when it does not
    say); re-read and retry, or pass ``retry_conflicts=`` to the client's ``append``.
    """

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        super().__init__(status, problem)
        self.session_id = str(problem.get("session_id", ""))
        self.field = self.field or "seq"
        self.expected = _int_or(problem.get("expected"), -1)
        self.actual = _int_or(problem.get("actual"), -1)


def _int_or(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class MessageIdConflict(ServiceError, MessageConflict):
    """A message id the session stores with other content was sent again (409)."""

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        super().__init__(status, problem)
        self.session_id = str(problem.get("session_id", ""))
        self.message_id = str(problem.get("message_id", self.value or ""))
        self.seq = _int_or(problem.get("seq"), -1)


class ServiceUnavailable(ServiceError, TransientError):
    """The service or one of its stores is unavailable for now (502, 503, 504), or the
    chat upstream failed; ``retry_after`` is the server's hint in seconds, if any."""

    def __init__(
        self, status: int, problem: Mapping[str, Any], retry_after: float | None = None
    ) -> None:
        super().__init__(status, problem)
        self.retry_after = retry_after


class RateLimited(ServiceUnavailable):
    """The key is over its rate limit (429); retry after ``retry_after`` seconds."""
