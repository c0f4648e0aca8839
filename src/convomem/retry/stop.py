"""Stop conditions: when no further attempt may be made (``|`` either, ``&`` both)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import _check
from .state import RetryState


class Stop:
    """A stop condition: ``stop(state)`` is True when no further attempt may be made."""

    def __call__(self, state: RetryState) -> bool:
        raise NotImplementedError

    def __or__(self, other: Stop) -> Stop:
        return _StopAny((self, _as_stop(other)))

    def __and__(self, other: Stop) -> Stop:
        return _StopAll((self, _as_stop(other)))


@dataclass(frozen=True, slots=True)
class _StopAny(Stop):
    parts: tuple[Stop, ...]

    def __call__(self, state: RetryState) -> bool:
        return any(p(state) for p in self.parts)

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.parts))


@dataclass(frozen=True, slots=True)
class _StopAll(Stop):
    parts: tuple[Stop, ...]

    def __call__(self, state: RetryState) -> bool:
        return all(p(state) for p in self.parts)

    def __repr__(self) -> str:
        return "(" + " & ".join(map(repr, self.parts)) + ")"


@dataclass(frozen=True, slots=True)
class _StopFn(Stop):
    fn: Callable[[RetryState], bool]

    def __call__(self, state: RetryState) -> bool:
        return bool(self.fn(state))

    def __repr__(self) -> str:
        return f"stop({self.fn!r})"


@dataclass(frozen=True, slots=True)
class stop_after_attempt(Stop):
    """Stop once ``attempts`` attempts were made (``1``: never retry)."""

    attempts: int

    def __post_init__(self) -> None:
        _check.positive_int("attempts", self.attempts)

    def __call__(self, state: RetryState) -> bool:
        return state.attempt >= self.attempts

    def __repr__(self) -> str:
        return f"stop_after_attempt({self.attempts})"


@dataclass(frozen=True, slots=True)
class stop_after_delay(Stop):
    """Stop once ``seconds`` have passed since the first attempt started."""

    seconds: float

    def __post_init__(self) -> None:
        _check.number("seconds", self.seconds, minimum=0.0)

    def __call__(self, state: RetryState) -> bool:
        return state.elapsed >= self.seconds

    def __repr__(self) -> str:
        return f"stop_after_delay({self.seconds})"


@dataclass(frozen=True, slots=True)
class stop_never(Stop):
    """Never stop on its own (the retry predicate alone decides)."""

    def __call__(self, state: RetryState) -> bool:
        return False

    def __repr__(self) -> str:
        return "stop_never()"


def _as_stop(value: object) -> Stop:
    if isinstance(value, Stop):
        return value
    return _StopFn(_check.function("stop", value, "RetryState -> bool"))
