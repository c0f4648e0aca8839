"""RetryPolicy: the three parts together, and the attempts of one operation."""

from __future__ import annotations

import asyncio
import inspect
import math
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

from .. import _check
from .._io import Gen, Sleep
from ..errors import ConfigError, TransientError
from .predicates import RetryPredicate, _as_retry, retry_if_exception_type
from .state import RetryDecision, RetryState, Uniform
from .stop import Stop, _as_stop, stop_after_attempt
from .wait import Wait, _as_wait, wait_full_jitter, wait_none

T = TypeVar("T")

StopLike: TypeAlias = Stop | Callable[[RetryState], bool]
WaitLike: TypeAlias = Wait | Callable[[RetryState], float]
RetryLike: TypeAlias = (
    RetryPredicate
    | type[BaseException]
    | tuple[type[BaseException], ...]
    | Callable[[BaseException], bool]
)


class RetryPolicy:
    """When to retry a failed operation and how long to wait first; no I/O of its own.

    ``stop`` (default ``stop_after_attempt(3)``), ``wait`` (default
    ``wait_full_jitter(0.05, max=2.0)``) and ``retry`` (default
    ``retry_if_exception_type(TransientError)``; an exception class or a tuple of them
    is accepted too) are the parts; ``rng`` feeds jittered waits (a ``random.Random``
    for reproducible delays) and ``clock`` (seconds, monotonic) measures the elapsed
    time ``stop_after_delay`` looks at. A policy is immutable and reusable: each
    operation gets its own ``attempts()``.
    """

    __slots__ = ("clock", "retry", "rng", "stop", "wait")

    def __init__(
        self,
        *,
        stop: StopLike | None = None,
        wait: WaitLike | None = None,
        retry: RetryLike | None = None,
        rng: Uniform | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stop: Stop = stop_after_attempt(3) if stop is None else _as_stop(stop)
        self.wait: Wait = wait_full_jitter(0.05, max=2.0) if wait is None else _as_wait(wait)
        self.retry: RetryPredicate = (
            retry_if_exception_type(TransientError) if retry is None else _as_retry(retry)
        )
        if rng is not None and not callable(getattr(rng, "uniform", None)):
            raise ConfigError(f"rng={rng!r}: must have a uniform(a, b) method")
        self.rng: Uniform = random.Random() if rng is None else rng
        self.clock = _check.function("clock", clock, "() -> seconds")

    @classmethod
    def no_retry(cls) -> RetryPolicy:
        """A policy that gives up on the first failure."""
        return cls(stop=stop_after_attempt(1), wait=wait_none())

    def attempts(self) -> RetryAttempts:
        """Start one operation: its own attempt count and start time."""
        return RetryAttempts(self)

    def call(
        self, fn: Callable[..., T], /, *args: Any, sleep: Callable[[float], object] = time.sleep
    ) -> T:
        """Call ``fn(*args)`` until it succeeds or the policy gives up (the last error
        is raised as it is)."""
        attempts = self.attempts()
        while True:
            try:
                return fn(*args)
            except Exception as error:
                decision = attempts.failed(error)
                if not decision.retry:
                    raise
            sleep(decision.delay)

    async def acall(
        self,
        fn: Callable[..., Awaitable[T]],
        /,
        *args: Any,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> T:
        """Async twin of ``call``: ``fn(*args)`` and ``sleep`` are awaited."""
        attempts = self.attempts()
        while True:
            try:
                return await fn(*args)
            except Exception as error:
                decision = attempts.failed(error)
                if not decision.retry:
                    raise
            pending = sleep(decision.delay)
            if inspect.isawaitable(pending):
                await pending

    def retried(self, attempt: Callable[[], Gen[T]]) -> Gen[T]:
        """The same loop for sans-I/O logic: ``yield from policy.retried(attempt)`` runs
        the generator ``attempt()`` until it returns, yielding ``Sleep`` between failed
        attempts (the ``_io`` drivers perform it), and raises the last error when the
        policy gives up. Each attempt starts afresh (re-read what it needs)."""
        attempts = self.attempts()
        while True:
            try:
                return (yield from attempt())
            except Exception as error:
                decision = attempts.failed(error)
                if not decision.retry:
                    raise
            yield Sleep(decision.delay)

    def __repr__(self) -> str:
        return f"RetryPolicy(stop={self.stop!r}, wait={self.wait!r}, retry={self.retry!r})"


class RetryAttempts:
    """The attempts of one operation (from ``RetryPolicy.attempts()``).

    Call ``failed(error)`` after each failed attempt; a success needs no report. The
    clock starts when the object is made, that is just before the first attempt.
    """

    __slots__ = ("_start", "attempt", "policy")

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.attempt = 0
        self._start = policy.clock()

    def failed(self, error: BaseException) -> RetryDecision:
        """The decision for the attempt that just failed with ``error``."""
        policy = self.policy
        self.attempt += 1
        n = self.attempt
        if not policy.retry(error):
            return RetryDecision(False, 0.0, n, f"not retryable: {type(error).__name__}")
        state = RetryState(n, policy.clock() - self._start, error, policy.rng)
        if policy.stop(state):
            return RetryDecision(False, 0.0, n, f"stopped by {policy.stop!r}", stopped=True)
        delay = policy.wait(state)
        if (
            isinstance(delay, bool)
            or not isinstance(delay, int | float)
            or not math.isfinite(delay)
            or delay < 0
        ):
            raise ConfigError(
                f"wait={policy.wait!r}: returned {delay!r}; must be a finite number of seconds >= 0"
            )
        return RetryDecision(True, float(delay), n, "retry")

    def __repr__(self) -> str:
        return f"<RetryAttempts {self.attempt} failed>"
