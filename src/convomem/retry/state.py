"""What the parts of a retry policy see, and what the policy answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Uniform(Protocol):
    """A source of randomness: ``random.Random`` or anything with ``uniform(a, b)``."""

    def uniform(self, a: float, b: float, /) -> float: ...


@dataclass(frozen=True, slots=True)
class RetryState:
    """What the parts of a policy see after a failure."""

    attempt: int
    """Attempts made so far, this failed one included (1 after the first failure)."""
    elapsed: float
    """Seconds since the first attempt started (by the policy's clock)."""
    error: BaseException
    """The error of the attempt that just failed."""
    rng: Uniform
    """The policy's randomness (jittered waits draw from it)."""


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """The answer to a failure: retry after ``delay`` seconds, or give up."""

    retry: bool
    delay: float
    """Seconds to sleep before the next attempt (0.0 when giving up)."""
    attempt: int
    """The attempt that failed (1-based)."""
    reason: str
    """Why: ``"retry"``, ``"not retryable: <error type>"`` or ``"stopped by <stop>"``."""
    stopped: bool = False
    """True when the error was retryable but the stop condition ended the retries (a
    caller reports "gave up after N attempts"); False for a retry or an error that is
    not retryable at all (a caller re-raises it as it is)."""
