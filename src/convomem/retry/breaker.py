"""``CircuitBreaker``: stop calling a backend that keeps failing, and try it again later.

A sans-I/O state machine (it never calls, sleeps or logs), shared by every caller and
safe to use from many threads at once:

- **closed** (normal): every call is allowed; ``failures`` consecutive failures open it
  (a success resets the count).
- **open**: no call is allowed, so a dead backend is not hammered; after ``reset_after``
  seconds it becomes half-open.
- **half-open**: ``half_open_calls`` trial calls are allowed; the first success closes
  it, a failure opens it again for another ``reset_after`` seconds. A trial whose report
  never comes (its caller was cancelled) frees its place after ``reset_after`` seconds,
  so a lost report cannot keep the breaker shut for good.

The caller asks ``allow()`` before each call and reports ``record_success()`` or
``record_failure()`` after it. While open, reports of calls admitted before it opened
change nothing (the backend has already been judged). ``clock`` (default
``time.monotonic``) is injectable, so tests drive the time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal

from .. import _check

__all__ = ["BreakerState", "CircuitBreaker"]

BreakerState = Literal["closed", "open", "half-open"]


class CircuitBreaker:
    """Closed -> open after ``failures`` consecutive failures -> half-open after
    ``reset_after`` seconds (``half_open_calls`` trials) -> closed on a success, open
    again on a failure. See the module docstring."""

    def __init__(
        self,
        failures: int = 5,
        reset_after: float = 30.0,
        half_open_calls: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failures = _check.positive_int("failures", failures)
        self.reset_after = _check.number("reset_after", reset_after, minimum=0.0)
        self.half_open_calls = _check.positive_int("half_open_calls", half_open_calls)
        self._clock = _check.function("clock", clock, "() -> seconds")
        self._lock = threading.Lock()
        self._open = False
        self._opened_at = 0.0
        self._consecutive = 0
        self._trials: list[float] = []  # when the pending half-open trials were granted

    def _state(self) -> BreakerState:
        # Under the lock. Open turns half-open by the clock alone, with no event.
        if not self._open:
            return "closed"
        if self._clock() - self._opened_at >= self.reset_after:
            return "half-open"
        return "open"

    @property
    def state(self) -> BreakerState:
        """``"closed"``, ``"open"`` or ``"half-open"`` now."""
        with self._lock:
            return self._state()

    @property
    def consecutive_failures(self) -> int:
        """Failures since the last success (0 once the breaker closes again)."""
        with self._lock:
            return self._consecutive

    def allow(self) -> bool:
        """May a call go to the backend now? (In half-open, each True is one trial.)"""
        with self._lock:
            state = self._state()
            if state == "closed":
                return True
            if state == "open":
                return False
            now = self._clock()
            self._trials = [t for t in self._trials if now - t < self.reset_after]
            if len(self._trials) >= self.half_open_calls:
                return False
            self._trials.append(now)
            return True

    def record_success(self) -> None:
        """A call answered: close (from half-open) or reset the failure count."""
        with self._lock:
            state = self._state()
            if state == "open":
                return
            self._open = False
            self._consecutive = 0
            self._trials = []

    def record_failure(self) -> None:
        """A call failed: count it; open after ``failures`` in a row, or at once from
        half-open."""
        with self._lock:
            state = self._state()
            if state == "open":
                return
            self._consecutive += 1
            if state == "half-open" or self._consecutive >= self.failures:
                self._open = True
                self._opened_at = self._clock()
                self._trials = []

    def __repr__(self) -> str:
        return (
            f"<CircuitBreaker {self.state} failures={self.failures} "
            f"reset_after={self.reset_after} half_open_calls={self.half_open_calls}>"
        )
