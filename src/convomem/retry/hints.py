"""Honouring a server's ``Retry-After``: a wait and a stop that read the failed call's hint.

A rate-limited or overloaded server (429, 503) often says when to come back. The client
that raised the error puts that hint on it (``TransientError.retry_after``, seconds);
these parts read it:

- ``wait_retry_after(fallback, max=)``: wait what the server asked (at most ``max``),
  or ``fallback``'s delay when it asked nothing;
- ``stop_when_retry_after_exceeds(seconds)``: give up at once when the server asks for
  a longer pause than the caller can afford (a summarizer with a fallback answers
  degraded now rather than blocking a conversation for a minute);
- ``parse_retry_after(headers)``: the hint of an HTTP response, for the client to keep;
- ``hinted_policy()``: both, in the policy the model clients use by default;
- ``breaker_open(what, breaker)``: the error of a call a ``CircuitBreaker`` refused, a
  ``TransientError`` whose hint is the breaker's ``reset_after``: ``hinted_policy``
  does not wait that long, so the caller's fallback answers at once.

    RetryPolicy(
        stop=stop_after_attempt(3) | stop_when_retry_after_exceeds(5),
        wait=wait_retry_after(wait_full_jitter(0.05, max=2.0)),
    )
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .. import _check
from ..errors import TransientError
from .breaker import CircuitBreaker
from .policy import RetryPolicy
from .predicates import retry_if_exception_type
from .state import RetryState
from .stop import Stop, stop_after_attempt, stop_after_delay
from .wait import Wait, _as_wait, wait_full_jitter

__all__ = [
    "breaker_open",
    "hinted_policy",
    "parse_retry_after",
    "retry_after_of",
    "stop_when_retry_after_exceeds",
    "wait_retry_after",
]


def retry_after_of(error: BaseException) -> float | None:
    """The ``retry_after`` hint (seconds, finite, >= 0) an error carries, else None."""
    hint = getattr(error, "retry_after", None)
    if isinstance(hint, bool) or not isinstance(hint, int | float) or not math.isfinite(hint):
        return None
    return max(0.0, float(hint))


def parse_retry_after(headers: Any) -> float | None:
    """A response's ``Retry-After`` (``retry-after-ms`` first) in seconds, from its
    headers (anything with a case-insensitive ``get``: httpx's, urllib's); a date, a
    negative or a non-finite value is no hint."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


@dataclass(frozen=True, slots=True)
class wait_retry_after(Wait):
    """The error's ``Retry-After`` hint, at most ``max`` seconds; ``fallback``'s delay
    when the error has none (default ``wait_full_jitter(0.05, max=2.0)``)."""

    fallback: Wait = field(default_factory=lambda: wait_full_jitter(0.05, max=2.0))
    max: float = 60.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "fallback", _as_wait(self.fallback))
        _check.number("max", self.max, minimum=0.0)

    def __call__(self, state: RetryState) -> float:
        hint = retry_after_of(state.error)
        if hint is None:
            return self.fallback(state)
        return min(hint, float(self.max))

    def __repr__(self) -> str:
        return f"wait_retry_after({self.fallback!r}, max={self.max})"


@dataclass(frozen=True, slots=True)
class stop_when_retry_after_exceeds(Stop):
    """Stop when the failed call's ``Retry-After`` hint is over ``seconds``."""

    seconds: float

    def __post_init__(self) -> None:
        _check.number("seconds", self.seconds, minimum=0.0)

    def __call__(self, state: RetryState) -> bool:
        hint = retry_after_of(state.error)
        return hint is not None and hint > self.seconds

    def __repr__(self) -> str:
        return f"stop_when_retry_after_exceeds({self.seconds})"


def hinted_policy(
    attempts: int = 3, max_wait: float = 5.0, max_delay: float | None = None
) -> RetryPolicy:
    """The policy of a call to a remote model: ``TransientError`` s retried up to
    ``attempts`` calls, waiting what a ``Retry-After`` asks, or a jittered backoff
    (0.05 s doubling, at most 2 s); a server asking for more than ``max_wait`` seconds
    ends the retries at once (the caller's fallback answers now), and so does
    ``max_delay`` seconds gone since the first call (give the client's timeout: a call
    that timed out is not tried again, so a hung model costs one timeout, at most two)."""
    _check.positive_int("attempts", attempts)
    _check.number("max_wait", max_wait, minimum=0.0)
    stop = stop_after_attempt(attempts) | stop_when_retry_after_exceeds(max_wait)
    if max_delay is not None:
        stop = stop | stop_after_delay(_check.number("max_delay", max_delay, minimum=0.0))
    return RetryPolicy(
        stop=stop,
        wait=wait_retry_after(wait_full_jitter(0.05, max=2.0), max=max_wait),
        retry=retry_if_exception_type(TransientError),
    )


def breaker_open(what: str, breaker: CircuitBreaker) -> TransientError:
    """The error of a call ``breaker`` did not let through (``what`` names the caller)."""
    error = TransientError(
        f"{what}: not called: the circuit breaker is open after "
        f"{breaker.consecutive_failures} failures in a row (next trial within "
        f"{breaker.reset_after:g} s)"
    )
    error.retry_after = breaker.reset_after
    return error
