"""When a session expires: the one rule every read path applies.

A session expires at the earlier of

- its ``expires_at``: the database's ``TTLPolicy`` (``?ttl=`` in a store URL), kept by
  the store itself, which hides the session from ``info()`` and ``sessions()`` at once;
- ``updated_at`` plus its own TTL, ``metadata["convomem:ttl_seconds"]`` (the service's
  ``ttl_seconds`` of a session: it expires that long after its last write).

Expiry is a rule of reading, not a sweep: a session is unreadable the moment it
expires, on every path (its context, the recall of its user's other sessions, the facts
said in it, listings, the inspector, exports); ``sweep()`` only reclaims the space.
``expired`` is the rule in Python (over a ``SessionInfo``); ``expired_sessions_sql`` the
same rule in SQL, for the reads that run inside the database (recall, facts).
"""

from __future__ import annotations

import time

from .._expiry import TTL_KEY, expired_sessions_sql
from .database import SessionInfo

__all__ = ["TTL_KEY", "expired", "expired_sessions_sql", "expires_at", "ttl_of"]


def ttl_of(info: SessionInfo) -> float | None:
    """The session's own TTL in seconds (None: none)."""
    ttl = info.metadata.get(TTL_KEY)
    return float(ttl) if isinstance(ttl, int | float) and not isinstance(ttl, bool) else None


def expires_at(info: SessionInfo) -> float | None:
    """When the session expires: its own TTL after its last write, or the store's."""
    ttl = ttl_of(info)
    own = None if ttl is None else info.updated_at + ttl
    if own is None or info.expires_at is None:
        return own if info.expires_at is None else info.expires_at
    return min(own, info.expires_at)


def expired(info: SessionInfo, now: float | None = None) -> bool:
    """Whether the session has expired at ``now`` (default: the wall clock)."""
    at = expires_at(info)
    return at is not None and at <= (time.time() if now is None else now)
