"""The sans-I/O part of ``GuardedRecall`` and ``AsyncGuardedRecall`` (``guarded.py``):
the outcome type, what counts as an outage, and ``_Guard``, which makes every decision
(input checks, the breaker, the bound on searches in flight, outcomes, the once-per-outage
log lines) so the twins differ only in how they wait."""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from .. import _check
from ..errors import ConfigError, EmbeddingError, StoreError, TransientError, bounded_repr
from ..retry.breaker import CircuitBreaker
from ._backend import Hit
from ._core import scope_of

log = logging.getLogger("convomem.recall")

RecallStatus = Literal["ok", "failed", "timeout", "open"]

OUTAGES: Final[tuple[type[Exception], ...]] = (
    TransientError,
    StoreError,
    EmbeddingError,
    OSError,  # includes ConnectionError and TimeoutError
)


@dataclass(frozen=True, slots=True)
class RecallOutcome:
    """What one guarded search gave: ``hits`` (empty unless ``status == "ok"``), why
    (``status``, ``error``) and how long the caller waited (``elapsed`` seconds)."""

    hits: list[Hit]
    status: RecallStatus
    error: str | None = None
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Searchable(Protocol):
    """What ``GuardedRecall`` wraps: a ``search(query, *, user_id, k, tenant, ...)``."""

    @property
    def search(self) -> Callable[..., list[Hit]]: ...


class AsyncSearchable(Protocol):
    """What ``AsyncGuardedRecall`` wraps: an async ``search``."""

    @property
    def search(self) -> Callable[..., Awaitable[list[Hit]]]: ...


class _Ticket:
    """One admitted search: whether it has returned, and whether its caller gave up."""

    __slots__ = ("done", "late")

    def __init__(self) -> None:
        self.done = False
        self.late = False


class _Guard:
    """The sans-I/O part both twins share: checks, the breaker, the bounded number of
    searches in flight, the outcomes and the once-per-outage log lines."""

    def __init__(
        self,
        deadline: float | None,
        breaker: CircuitBreaker | None,
        logger: logging.Logger | None,
        max_late: int,
        clock: Callable[[], float],
    ) -> None:
        self.deadline = (
            None
            if deadline is None
            else _check.number("deadline", deadline, minimum=0.0, low_open=True)
        )
        if breaker is not None and not isinstance(breaker, CircuitBreaker):
            raise ConfigError(f"breaker={bounded_repr(breaker)}: must be a CircuitBreaker or None")
        self.breaker = CircuitBreaker() if breaker is None else breaker
        if logger is not None and not isinstance(logger, logging.Logger):
            raise ConfigError(f"logger={bounded_repr(logger)}: must be a logging.Logger or None")
        self.log = log if logger is None else logger
        self.max_late = _check.positive_int("max_late", max_late)
        self.clock = _check.function("clock", clock, "() -> seconds")
        self._lock = threading.Lock()
        self._running = 0
        self._late = 0
        self._down_since: float | None = None
        self._missed = 0
        self.counts: dict[RecallStatus, int] = {"ok": 0, "failed": 0, "timeout": 0, "open": 0}

    @property
    def available(self) -> bool:
        """False from the first search answered without recall until the next "ok"."""
        with self._lock:
            return self._down_since is None

    def check(self, query: object, user_id: object, tenant: object, k: object) -> None:
        if not isinstance(query, str):
            raise ConfigError(f"query={bounded_repr(query)}: must be a string")
        scope_of(user_id, tenant)
        _check.positive_int("k", k)

    def admit(self, start: float) -> RecallOutcome | _Ticket:
        """A ticket when the search may run (``finish`` it when the backend returns,
        ``abandon`` it when the caller stops waiting); else the outcome to answer now."""
        if not self.breaker.allow():
            return self._down("open", "circuit breaker open: recall skipped", start)
        with self._lock:
            stuck = self._late >= self.max_late
            if not stuck:
                self._running += 1
        if stuck:
            self.breaker.record_failure()
            why = f"{self.max_late} late search(es) still running: the backend is stuck"
            return self._down("timeout", why, start)
        return _Ticket()

    def finish(self, ticket: _Ticket) -> None:
        with self._lock:
            self._running -= 1
            ticket.done = True
            if ticket.late:
                self._late -= 1

    def abandon(self, ticket: _Ticket) -> None:
        with self._lock:
            if not ticket.done and not ticket.late:
                ticket.late = True
                self._late += 1

    def succeeded(self, hits: list[Hit], start: float) -> RecallOutcome:
        self.breaker.record_success()
        now = self.clock()
        with self._lock:
            self.counts["ok"] += 1
            since, missed = self._down_since, self._missed
            self._down_since, self._missed = None, 0
        if since is not None:
            self.log.info(
                "recall recovered: %d search(es) answered without recall over %.1f s",
                missed,
                now - since,
            )
        return RecallOutcome(list(hits), "ok", None, now - start)

    def answered_with_error(self) -> None:
        """The backend raised the caller's error: it is up, the error propagates."""
        self.breaker.record_success()

    def failed(self, exc: BaseException, start: float) -> RecallOutcome:
        self.breaker.record_failure()
        return self._down("failed", f"{type(exc).__name__}: {exc}", start)

    def timed_out(self, start: float) -> RecallOutcome:
        self.breaker.record_failure()
        return self._down("timeout", f"no answer within {self.deadline} s", start)

    def _down(self, status: RecallStatus, error: str, start: float) -> RecallOutcome:
        now = self.clock()
        with self._lock:
            self.counts[status] += 1
            starts = self._down_since is None
            if starts:
                self._down_since = now
            self._missed += 1
        if starts:
            self.log.warning(
                "recall unavailable (%s: %s); answering without recall until it recovers",
                status,
                error,
            )
        return RecallOutcome([], status, error, now - start)


class _Guarded:
    """What both twins expose besides ``search``: the breaker, the health flag, the
    counts, and the index's other attributes (``add``, ``submit``, ``delete``...)."""

    index: Any
    _guard: _Guard

    @property
    def breaker(self) -> CircuitBreaker:
        return self._guard.breaker

    @property
    def available(self) -> bool:
        """False while recall is out (from the first search without it to the next "ok")."""
        return self._guard.available

    @property
    def in_flight(self) -> int:
        """Searches running now, late (abandoned) ones included."""
        with self._guard._lock:
            return self._guard._running

    @property
    def late(self) -> int:
        """Searches still running after their caller got "timeout" (from ``max_late`` on,
        new searches answer "timeout" at once)."""
        with self._guard._lock:
            return self._guard._late

    @property
    def counts(self) -> dict[RecallStatus, int]:
        """How many searches ended with each status."""
        with self._guard._lock:
            return dict(self._guard.counts)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the wrapper lacks; never for its own (half-built) state.
        if name.startswith("__") or name in ("index", "_guard", "_workers"):
            raise AttributeError(name)
        return getattr(self.index, name)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} deadline={self._guard.deadline} {self.breaker!r} "
            f"over {self.index!r}>"
        )
