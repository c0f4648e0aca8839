"""Retry predicates: whether an error may be retried at all (``|`` either, ``&`` both)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import _check
from ..errors import ConfigError, TransientError


class RetryPredicate:
    """Decides from the error whether an attempt may be retried at all."""

    def __call__(self, error: BaseException) -> bool:
        raise NotImplementedError

    def __or__(self, other: RetryPredicate) -> RetryPredicate:
        return _RetryAny((self, _as_retry(other)))

    def __and__(self, other: RetryPredicate) -> RetryPredicate:
        return _RetryAll((self, _as_retry(other)))


@dataclass(frozen=True, slots=True)
class _RetryAny(RetryPredicate):
    parts: tuple[RetryPredicate, ...]

    def __call__(self, error: BaseException) -> bool:
        return any(p(error) for p in self.parts)

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.parts))


@dataclass(frozen=True, slots=True)
class _RetryAll(RetryPredicate):
    parts: tuple[RetryPredicate, ...]

    def __call__(self, error: BaseException) -> bool:
        return all(p(error) for p in self.parts)

    def __repr__(self) -> str:
        return "(" + " & ".join(map(repr, self.parts)) + ")"


@dataclass(frozen=True, slots=True)
class retry_if(RetryPredicate):
    """Retry when ``predicate(error)`` is true."""

    predicate: Callable[[BaseException], bool]

    def __post_init__(self) -> None:
        _check.function("predicate", self.predicate, "error -> bool")

    def __call__(self, error: BaseException) -> bool:
        return bool(self.predicate(error))

    def __repr__(self) -> str:
        return f"retry_if({self.predicate!r})"


def _check_types(types: tuple[object, ...]) -> tuple[type[BaseException], ...]:
    if not types:
        raise ConfigError("types=(): name at least one exception type")
    for t in types:
        if not (isinstance(t, type) and issubclass(t, BaseException)):
            raise ConfigError(f"types={t!r}: must be an exception class")
    return types  # type: ignore[return-value]


class retry_if_exception_type(RetryPredicate):
    """Retry errors of the given types (subclasses included); ``TransientError`` by default."""

    __slots__ = ("types",)

    def __init__(self, *types: type[BaseException]) -> None:
        self.types = _check_types(types) if types else (TransientError,)

    def __call__(self, error: BaseException) -> bool:
        return isinstance(error, self.types)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.types == self.types

    def __hash__(self) -> int:
        return hash((type(self), self.types))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(t.__name__ for t in self.types)})"


class retry_if_not_exception_type(retry_if_exception_type):
    """Retry every error except those of the given types."""

    __slots__ = ()

    def __init__(self, *types: type[BaseException]) -> None:
        self.types = _check_types(types)

    def __call__(self, error: BaseException) -> bool:
        return not isinstance(error, self.types)


def retry_always() -> RetryPredicate:
    """Retry any ``Exception`` (never a ``KeyboardInterrupt`` or other BaseException)."""
    return retry_if_exception_type(Exception)


def retry_never() -> RetryPredicate:
    """Never retry."""
    return retry_if(_false)


def _false(error: BaseException) -> bool:
    return False


def _as_retry(value: object) -> RetryPredicate:
    if isinstance(value, RetryPredicate):
        return value
    if isinstance(value, type) and issubclass(value, BaseException):
        return retry_if_exception_type(value)
    if isinstance(value, tuple):
        return retry_if_exception_type(*_check_types(value))
    return retry_if(_check.function("retry", value, "error -> bool"))
