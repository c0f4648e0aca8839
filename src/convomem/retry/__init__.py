"""One retry policy for every caller: small composable parts, and no I/O of its own.

Modelled on tenacity. A policy is three parts, each a small object combined freely:

- a **stop** condition: ``stop_after_attempt(3) | stop_after_delay(10)`` (``|``: either
  stops, ``&``: both must);
- a **wait**: ``wait_fixed(0.1) + wait_full_jitter(0.05, max=2)`` (``+`` adds the delays);
- a **retry** predicate on the error: ``retry_if_exception_type(TransientError)`` (the
  default), combinable with ``|`` and ``&``.

``RetryPolicy`` never sleeps and never calls anything. ``policy.attempts()`` starts one
operation; after each failure ``attempts.failed(error)`` answers with a
``RetryDecision``: "sleep ``delay`` seconds, then retry", or "give up" (with the
reason). The sync and async callers (paginated loading, ``RunningSummary``, the stores)
share every rule and differ only in how they sleep::

    attempts = policy.attempts()
    while True:
        try:
            return fetch()
        except Exception as error:
            decision = attempts.failed(error)
            if not decision.retry:
                raise
            time.sleep(decision.delay)      # or: await asyncio.sleep(decision.delay)

``wait_retry_after`` and ``stop_when_retry_after_exceeds`` (``hints``) read a server's
``Retry-After`` hint off the error (``TransientError.retry_after``).

``policy.call(fn)`` and ``await policy.acall(fn)`` are that loop, ready-made. A plain
callable works wherever a part is expected: ``stop=lambda state: ...``,
``wait=lambda state: ...``, ``retry=lambda error: ...``.

``CircuitBreaker`` is the other half: it stops calling a backend that keeps failing and
lets a trial call through after a while (``breaker.allow()`` before a call,
``record_success()`` / ``record_failure()`` after it).
"""

from .breaker import BreakerState, CircuitBreaker
from .hints import (
    breaker_open,
    hinted_policy,
    parse_retry_after,
    retry_after_of,
    stop_when_retry_after_exceeds,
    wait_retry_after,
)
from .policy import RetryAttempts, RetryLike, RetryPolicy, StopLike, WaitLike
from .predicates import (
    RetryPredicate,
    retry_always,
    retry_if,
    retry_if_exception_type,
    retry_if_not_exception_type,
    retry_never,
)
from .state import RetryDecision, RetryState, Uniform
from .stop import Stop, stop_after_attempt, stop_after_delay, stop_never
from .wait import Wait, wait_exponential, wait_fixed, wait_full_jitter, wait_none, wait_random

__all__ = [
    "BreakerState",
    "CircuitBreaker",
    "RetryAttempts",
    "RetryDecision",
    "RetryLike",
    "RetryPolicy",
    "RetryPredicate",
    "RetryState",
    "Stop",
    "StopLike",
    "Uniform",
    "Wait",
    "WaitLike",
    "breaker_open",
    "hinted_policy",
    "parse_retry_after",
    "retry_after_of",
    "retry_always",
    "retry_if",
    "retry_if_exception_type",
    "retry_if_not_exception_type",
    "retry_never",
    "stop_after_attempt",
    "stop_after_delay",
    "stop_never",
    "stop_when_retry_after_exceeds",
    "wait_exponential",
    "wait_fixed",
    "wait_full_jitter",
    "wait_none",
    "wait_random",
    "wait_retry_after",
]
