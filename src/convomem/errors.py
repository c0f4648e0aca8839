"""The exception hierarchy: everything convomem raises on purpose is a ConvomemError."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .messages import Message


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
