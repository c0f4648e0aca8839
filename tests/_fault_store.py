"""A fault-injecting wrapper around any session store (``SessionStore`` or ``Store``).

``session/_faults.py``'s ``StoreFaults`` fails a call *before* it reaches the store (the
``Store`` contract: a failed ``add_items`` wrote nothing). A real network store also fails
*after* the write: the server committed, the reply was lost, the caller sees a
``TransientError`` and retries. That is the hard case, and ``ScheduledFaults`` adds it:

- ``schedule``: ``{call number: kind}`` over every call of the wrapped store (numbered
  from 0 in the order made): ``"before"`` raises ``TransientError`` without calling the
  store, ``"after"`` calls it (the write happens) and then raises, ``"latency"`` sleeps
  ``latency`` seconds first (real I/O's delay, where another writer may slip in).
- ``StoreFaults``' own faults (``down``, ``arm``) still fail before the call;
  ``suspended()`` reads the true state past every fault.
- ``injected`` counts what fired, by kind and by method.

``FaultySessionStore`` forwards every method of the protocols (and nothing else), so a
``ConversationMemory`` that detects a ``SessionStore`` by its methods finds the same
capabilities as on the store it wraps, each one faulty.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final

from convomem.errors import TransientError
from session._faults import StoreFaults

KINDS: Final = ("before", "after", "latency")

# Store (four methods + truncate) and SessionStore methods, forwarded when the wrapped
# store has them.
METHODS: Final = frozenset(
    {
        "get_items",
        "add_items",
        "pop_item",
        "clear_session",
        "truncate",
        "append",
        "page",
        "entries",
        "last_seq",
        "load_state",
        "save_state",
        "set_counts",
        "get_counts",
        "info",
        "set_metadata",
    }
)


class ScheduledFaults(StoreFaults):
    """``StoreFaults`` plus a schedule of faults by call number (module docstring)."""

    def __init__(
        self,
        schedule: Mapping[int, str] | None = None,
        *,
        latency: float = 0.0,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        super().__init__()
        self.schedule = dict(schedule or {})
        bad = {k for k in self.schedule.values() if k not in KINDS}
        if bad:
            raise ValueError(f"schedule kinds {sorted(bad)}: use {KINDS}")
        self.latency = latency
        self.sleep = sleep
        self.calls = 0
        self.injected: Counter[str] = Counter()

    def call(self, method: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` with the fault this call is scheduled to meet."""
        if self._suspended:
            return fn(*args, **kwargs)
        n = self.calls
        self.calls += 1
        self.check(method)  # down / armed: before the store
        kind = self.schedule.get(n)
        if kind is None:
            return fn(*args, **kwargs)
        self.injected[kind] += 1
        self.injected[f"{kind} {method}"] += 1
        if kind == "before":
            self.fired += 1
            raise TransientError(f"{method}: connection reset (call {n}, before the store)")
        if kind == "latency":
            self.sleep(self.latency)
            return fn(*args, **kwargs)
        fn(*args, **kwargs)  # "after": the store did it; the reply is lost
        self.fired += 1
        raise TransientError(f"{method}: connection reset (call {n}, after the store)")


class FaultySessionStore:
    """``inner`` (a sync store), each method failing as ``faults`` schedules."""

    def __init__(self, inner: Any, faults: ScheduledFaults) -> None:
        self.inner = inner
        self.faults = faults
        for name in ("session_id", "user_id", "tenant"):
            if hasattr(inner, name):
                setattr(self, name, getattr(inner, name))

    def __getattr__(self, name: str) -> Any:
        if name not in METHODS:
            raise AttributeError(name)
        fn = getattr(self.inner, name)  # AttributeError when the store lacks it

        def faulty(*args: Any, **kwargs: Any) -> Any:
            return self.faults.call(name, fn, *args, **kwargs)

        faulty.__name__ = name
        return faulty

    def __repr__(self) -> str:
        return f"<FaultySessionStore over {self.inner!r}>"
