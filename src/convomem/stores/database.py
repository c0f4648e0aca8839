"""The backend-neutral face of a durable store: protocols and the records they hand out.

``open_store(url)`` gives a ``StoreDatabase``; ``db.session(session_id, user_id=...,
tenant=...)`` a ``SessionStore`` for one session. Every backend (SQLite, Redis and
PostgreSQL) implements these protocols with the same semantics, held to them by one
conformance suite (``tests/stores/test_conformance.py``):

- **Scope.** A session is named by ``(tenant, session_id)``; ``tenant=None`` is a scope
  of its own. Nothing of one tenant is visible to another, even under the same session
  id. ``user_id`` is the owner, fixed when the session is first written; a handle opened
  with another ``user_id`` raises ``SessionOwnerMismatch`` (``user_id=None`` is an
  administrative handle that opens any session of its tenant).
- **The log.** Each message is stored whole (``Message.to_dict()`` as JSON) with a
  per-session ``seq``: appends take consecutive numbers after the highest ever given, so
  an append-only session holds exactly 1..n. A number is never reused, not even after
  ``pop_item``, ``truncate`` or ``clear_session`` (a summary covering seqs 1..50 keeps
  meaning what it meant); those tail removals are the only source of gaps.
- **Appends** are atomic and idempotent: a message whose id is stored with identical
  content is not stored again (an append made only of such messages is a no-op
  returning the seq of its last); the same id with other content raises
  ``MessageConflict``. ``expected_seq`` is the newest live seq the writer saw (0: empty);
  a mismatch raises ``ConcurrentUpdate`` and writes nothing.
- **Derived state** (a JSON object) is versioned: ``save_state(state,
  expected_version=v)`` is a compare-and-set; ``append(..., state=, expected_version=)``
  writes messages and state in one transaction.
- **Token counts** per tokenizer name are stored beside each message
  (``set_counts`` / ``get_counts`` / ``entries``), so a resumed session never
  re-tokenizes.
- **TTL** (``TTLPolicy``): ``expires_at`` is set when a session is created and
  refreshed on write (or on every access, or never); an expired session is invisible at
  once and deleted by ``db.sweep()``; writing to it starts a fresh session.
- **Faults.** A row that cannot be read raises ``CorruptRecord`` naming the session and
  the seq and carrying every valid message read; a transient failure (a lock held past
  the busy timeout, a dropped connection) is retried by the database's ``RetryPolicy``
  and then raises ``TransientError``; bad input raises before anything is written.
- **Tables of one's own.** What keeps its data beside the sessions, in the same
  database (the recall index, the service's keys and idempotency records), runs its
  operations through the database's driver: ``db.run_statements(op, write=...)``
  (awaited on an async database), with the same retries, error mapping and work
  counts. ``db.kind`` (``"sqlite"``, ``"postgresql"``, ``"redis"``) says which
  statements ``op`` yields (``convomem.stores.statements``); a table of one's own goes
  in ``db.schema`` (PostgreSQL), a key under ``db.prefix`` (Redis).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

from .. import _check
from ..model import Message

__all__ = [
    "AsyncSessionStore",
    "AsyncStoreDatabase",
    "Counts",
    "LogEntry",
    "SessionInfo",
    "SessionStore",
    "StoreDatabase",
    "StoreKind",
    "StoreStats",
    "TTLPolicy",
]

T = TypeVar("T")

Counts: TypeAlias = Mapping[str, Mapping[str, int]]
"""Token counts: ``{message_id: {tokenizer_name: count}}``."""
Refresh: TypeAlias = Literal["write", "read", "never"]
StoreKind: TypeAlias = Literal["sqlite", "postgresql", "redis"]
"""Which backend a database is, so which statements ``run_statements`` takes."""


@dataclass(frozen=True, slots=True)
class TTLPolicy:
    """When sessions expire: ``seconds`` after the last write (``refresh="write"``, the
    default), after the last access, reads included (``"read"``), or after creation
    (``"never"`` refreshed). ``seconds=None``: sessions never expire."""

    seconds: float | None = None
    refresh: Refresh = "write"

    def __post_init__(self) -> None:
        if self.seconds is not None:
            _check.number("ttl", self.seconds, minimum=0.0, low_open=True)
        _check.one_of("ttl_refresh", self.refresh, ("write", "read", "never"))

    def expires_at(self, now: float) -> float | None:
        """The expiry of a session created or refreshed at ``now``."""
        return None if self.seconds is None else now + self.seconds

    @property
    def on_read(self) -> bool:
        """Whether reads refresh the expiry."""
        return self.seconds is not None and self.refresh == "read"

    @property
    def on_write(self) -> bool:
        """Whether writes refresh the expiry."""
        return self.seconds is not None and self.refresh != "never"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What a database knows about one session (``db.sessions()``, ``store.info()``)."""

    session_id: str
    user_id: str | None
    tenant: str | None
    created_at: float
    updated_at: float
    expires_at: float | None
    metadata: dict[str, Any]
    message_count: int
    last_seq: int
    """The newest live message's seq (0 when the log is empty)."""
    state_version: int


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One stored message with its seq and its token counts per tokenizer name."""

    seq: int
    message: Message
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Work a database did since it was opened: what tests count instead of timing.

    ``statements`` are statements (SQL) or commands (Redis) sent, ``transactions``
    write transactions committed, ``rows_read`` stored rows (messages and sessions)
    read back.
    """

    statements: int = 0
    transactions: int = 0
    rows_read: int = 0


@runtime_checkable
class SessionStore(Protocol):
    """One durable session (sync): the four ``Store`` methods, paging, appends with
    optimistic concurrency, derived state and token counts. See the module docstring."""

    session_id: str
    user_id: str | None
    tenant: str | None

    def get_items(self, limit: int | None = None) -> list[Message]: ...
    def add_items(self, items: Sequence[Message]) -> None: ...
    def pop_item(self) -> Message | None: ...
    def clear_session(self) -> None: ...
    def truncate(self, keep: int) -> None: ...
    def append(
        self,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        state: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        counts: Counts | None = None,
    ) -> int: ...
    def page(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[Message], str | None]: ...
    def entries(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[LogEntry], str | None]: ...
    def last_seq(self) -> int: ...
    def load_state(self) -> tuple[dict[str, Any] | None, int]: ...
    def save_state(self, state: Mapping[str, Any] | None, *, expected_version: int) -> int: ...
    def set_counts(self, counts: Counts) -> None: ...
    def get_counts(self, message_ids: Sequence[str] | None = None) -> dict[str, dict[str, int]]: ...
    def info(self) -> SessionInfo | None: ...
    def set_metadata(self, metadata: Mapping[str, Any]) -> None: ...


@runtime_checkable
class AsyncSessionStore(Protocol):
    """The async twin of ``SessionStore`` (an ``AsyncStore``): the same methods, as
    coroutines, with the same semantics."""

    session_id: str
    user_id: str | None
    tenant: str | None

    async def get_items(self, limit: int | None = None) -> list[Message]: ...
    async def add_items(self, items: Sequence[Message]) -> None: ...
    async def pop_item(self) -> Message | None: ...
    async def clear_session(self) -> None: ...
    async def truncate(self, keep: int) -> None: ...
    async def append(
        self,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        state: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        counts: Counts | None = None,
    ) -> int: ...
    async def page(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[Message], str | None]: ...
    async def entries(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[LogEntry], str | None]: ...
    async def last_seq(self) -> int: ...
    async def load_state(self) -> tuple[dict[str, Any] | None, int]: ...
    async def save_state(
        self, state: Mapping[str, Any] | None, *, expected_version: int
    ) -> int: ...
    async def set_counts(self, counts: Counts) -> None: ...
    async def get_counts(
        self, message_ids: Sequence[str] | None = None
    ) -> dict[str, dict[str, int]]: ...
    async def info(self) -> SessionInfo | None: ...
    async def set_metadata(self, metadata: Mapping[str, Any]) -> None: ...


@runtime_checkable
class StoreDatabase(Protocol):
    """A durable store holding many sessions (sync); from ``open_store(url)``. It also
    runs operations of a caller's own (``run_statements``; see the module docstring)."""

    url: str
    ttl: TTLPolicy
    kind: StoreKind
    schema: str | None
    """PostgreSQL: the schema of convomem's tables, quoted (``"public"``); a caller's own
    tables go in it too. None for the others."""
    prefix: str | None
    """Redis: the prefix of every key (``convomem``); a caller's own keys start with it.
    None for the others."""

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> SessionStore: ...
    def sessions(
        self,
        *,
        user_id: str | None = None,
        tenant: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> tuple[list[SessionInfo], str | None]: ...
    def tenant_counts(self, *, user_id: str | None = None) -> dict[str | None, int]: ...
    def delete_session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> bool: ...
    def erase_user(self, user_id: str, *, tenant: str | None = None) -> int: ...
    def sweep(self) -> int: ...
    def stats(self) -> StoreStats: ...
    def close(self) -> None: ...
    def run_statements(self, op: Callable[[], Generator[Any, Any, T]], *, write: bool = False) -> T:
        """Run ``op()`` (a fresh generator per attempt, yielding the statements of
        ``convomem.stores.statements`` its ``kind`` takes) under the database's retry
        policy, its statements counted in ``stats()``; with ``write``, in one write
        transaction (SQL). What the generator returns."""
        ...


@runtime_checkable
class AsyncStoreDatabase(Protocol):
    """The async twin of ``StoreDatabase``; from ``aopen_store(url)``. ``session()``
    does no I/O and stays a plain method; everything else is a coroutine
    (``run_statements`` too: SQLite's runs in a worker thread of the database)."""

    url: str
    ttl: TTLPolicy
    kind: StoreKind
    schema: str | None
    prefix: str | None

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> AsyncSessionStore: ...
    async def sessions(
        self,
        *,
        user_id: str | None = None,
        tenant: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> tuple[list[SessionInfo], str | None]: ...
    async def tenant_counts(self, *, user_id: str | None = None) -> dict[str | None, int]: ...
    async def delete_session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> bool: ...
    async def erase_user(self, user_id: str, *, tenant: str | None = None) -> int: ...
    async def sweep(self) -> int: ...
    def stats(self) -> StoreStats: ...
    async def aclose(self) -> None: ...
    async def run_statements(
        self, op: Callable[[], Generator[Any, Any, T]], *, write: bool = False
    ) -> T: ...
