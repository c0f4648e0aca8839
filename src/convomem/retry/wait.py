"""Waits: the delay before the next attempt (``+`` adds them)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .. import _check
from ..errors import ConfigError
from .state import RetryState


class Wait:
    """A wait: ``wait(state)`` is the delay, in seconds, before the next attempt."""

    def __call__(self, state: RetryState) -> float:
        raise NotImplementedError

    def __add__(self, other: Wait) -> Wait:
        return _WaitSum((self, _as_wait(other)))


@dataclass(frozen=True, slots=True)
class _WaitSum(Wait):
    parts: tuple[Wait, ...]

    def __call__(self, state: RetryState) -> float:
        return sum(p(state) for p in self.parts)

    def __repr__(self) -> str:
        return " + ".join(map(repr, self.parts))


@dataclass(frozen=True, slots=True)
class _WaitFn(Wait):
    fn: Callable[[RetryState], float]

    def __call__(self, state: RetryState) -> float:
        return self.fn(state)

    def __repr__(self) -> str:
        return f"wait({self.fn!r})"


def _exponential(multiplier: float, exp_base: float, attempt: int, cap: float) -> float:
    """``min(cap, multiplier * exp_base ** (attempt - 1))`` without float overflow."""
    if multiplier == 0.0:
        return 0.0
    try:
        value = multiplier * exp_base ** (attempt - 1)
    except OverflowError:
        return cap
    return min(cap, value)


@dataclass(frozen=True, slots=True)
class wait_none(Wait):
    """No delay."""

    def __call__(self, state: RetryState) -> float:
        return 0.0

    def __repr__(self) -> str:
        return "wait_none()"


@dataclass(frozen=True, slots=True)
class wait_fixed(Wait):
    """The same delay before every retry."""

    seconds: float

    def __post_init__(self) -> None:
        _check.number("seconds", self.seconds, minimum=0.0)

    def __call__(self, state: RetryState) -> float:
        return float(self.seconds)

    def __repr__(self) -> str:
        return f"wait_fixed({self.seconds})"


@dataclass(frozen=True, slots=True)
class wait_random(Wait):
    """A delay drawn uniformly from ``[min, max]``."""

    min: float = 0.0
    max: float = 1.0

    def __post_init__(self) -> None:
        _check.number("min", self.min, minimum=0.0)
        _check.number("max", self.max, minimum=float(self.min))

    def __call__(self, state: RetryState) -> float:
        return state.rng.uniform(float(self.min), float(self.max))

    def __repr__(self) -> str:
        return f"wait_random({self.min}, {self.max})"


@dataclass(frozen=True, slots=True)
class wait_exponential(Wait):
    """``multiplier * exp_base ** (attempt - 1)``, clamped to ``[min, max]``.

    The first retry waits ``multiplier`` seconds, the next twice that (``exp_base=2``).
    """

    multiplier: float = 1.0
    max: float = math.inf
    exp_base: float = 2.0
    min: float = 0.0

    def __post_init__(self) -> None:
        _check.number("multiplier", self.multiplier, minimum=0.0)
        _check_cap("max", self.max)
        _check.number("exp_base", self.exp_base, minimum=1.0)
        _check.number("min", self.min, minimum=0.0)
        if self.min > self.max:
            raise ConfigError(f"min={self.min!r}: must not exceed max={self.max!r}")

    def __call__(self, state: RetryState) -> float:
        value = _exponential(float(self.multiplier), float(self.exp_base), state.attempt, self.max)
        return max(float(self.min), value)

    def __repr__(self) -> str:
        return f"wait_exponential(multiplier={self.multiplier}, max={self.max})"


@dataclass(frozen=True, slots=True)
class wait_full_jitter(Wait):
    """Exponential backoff with full jitter: uniform over
    ``[0, min(max, multiplier * exp_base ** (attempt - 1))]`` (AWS's "full jitter"),
    so many clients retrying at once spread out instead of stampeding together."""

    multiplier: float = 1.0
    max: float = math.inf
    exp_base: float = 2.0

    def __post_init__(self) -> None:
        _check.number("multiplier", self.multiplier, minimum=0.0)
        _check_cap("max", self.max)
        _check.number("exp_base", self.exp_base, minimum=1.0)

    def __call__(self, state: RetryState) -> float:
        ceiling = _exponential(
            float(self.multiplier), float(self.exp_base), state.attempt, self.max
        )
        return state.rng.uniform(0.0, ceiling)

    def __repr__(self) -> str:
        return f"wait_full_jitter(multiplier={self.multiplier}, max={self.max})"


def _check_cap(name: str, value: object) -> None:
    if isinstance(value, float) and value == math.inf:
        return
    _check.number(name, value, minimum=0.0)


def _as_wait(value: object) -> Wait:
    if isinstance(value, Wait):
        return value
    return _WaitFn(_check.function("wait", value, "RetryState -> seconds"))
