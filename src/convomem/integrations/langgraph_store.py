"""LangGraph's long-term ``BaseStore`` over a convomem store database (extra ``langgraph``).

``ConvomemStore(db, user_at=1, recall=RecallIndex(db))`` keeps LangGraph items (``put`` /
``get`` / ``search`` / ``delete`` / ``list_namespaces``) in the same SQLite, PostgreSQL or
Redis database as the conversations, so a user's memories live, expire and are erased
with the user's sessions::

    from convomem import open_store
    from convomem.integrations.langgraph import ConvomemStore
    from convomem.recall import RecallIndex

    db = open_store("sqlite:///agent.db")
    store = ConvomemStore(db, user_at=1, recall=RecallIndex(db))
    store.put(("memories", "u1"), "diet", {"text": "vegetarian since 2019"})
    store.search(("memories", "u1"), query="what does the user eat?")

- **Namespaces -> tenant and user.** ``tenant=`` scopes the whole store; the label at
  ``user_at`` in a namespace names the item's user (its owner in the database), so
  ``db.erase_user("u1")`` erases the user's items with the user's sessions and recall
  entries, and nothing of one user or tenant reaches another.
- **Search with recall.** With ``recall=`` (a ``RecallIndex``; ``AsyncRecallIndex`` over an
  async database), a query is answered by convomem's hybrid recall (BM25 + vectors) over
  the user's items, an item scoring its best indexed text (``fields=``, LangGraph's paths,
  default the whole value; ``put(..., index=[...])`` or ``index=False`` per item);
  ``SearchItem.score`` is the fused score. A query needs the user in the prefix. Without a
  query (or without recall) items come newest updated first, filtered by namespace prefix
  and ``filter`` (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, nested objects).
- **TTL.** ``supports_ttl``: ``put(..., ttl=minutes)`` or ``ttl={"default_ttl": ...,
  "refresh_on_read": ...}``; an expired item is invisible at once on every read of the
  store, whatever ``omit_expired`` says, and ``sweep_ttl()`` (or the thread
  ``start_ttl_sweeper()`` runs) deletes it, recall entries included. The database's own
  TTL policy applies on top.

Costs: a ``get`` is one read, a ``put`` a read and a write (plus the recall entries); a
query reads the hits' items; a search without a query and ``list_namespaces`` read every
session of the user (of the tenant when the prefix names no user). Ops in a ``batch`` run
in order. ``created_at`` is the item's first ``put`` (an update keeps it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .. import _io
from ..errors import ConfigError, MissingDependency
from ._lg_store_ops import (
    KIND,
    PAGE,
    Drop,
    Index,
    Layout,
    List,
    Read,
    Request,
    Steps,
    Write,
    get,
    namespaces,
    put,
    search,
    sweep,
)

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchOp,
        TTLConfig,
        validate_op_namespace,
    )
except ImportError:  # pragma: no cover - exercised in a process without the extra
    raise MissingDependency("convomem.integrations.langgraph", "langgraph", "langgraph") from None

__all__ = ["ConvomemStore"]

_OPERATORS = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _match(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics (JSONB-like): a dict matches nested keys, ``$``
    operators compare, a list matches element-wise, anything else by equality."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, k, v) for k, v in wanted.items())
        return isinstance(value, Mapping) and all(
            _match(value.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_match(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if op not in _OPERATORS:
        raise ConfigError(f"filter operator {op!r}: use one of $eq $ne $gt $gte $lt $lte")
    try:
        return bool(_OPERATORS[op](float(value), float(operand)))
    except (TypeError, ValueError):
        return False  # a missing or non-numeric value does not compare


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    return all(_match(value.get(k), v) for k, v in (filter or {}).items())


class ConvomemStore(BaseStore):
    """LangGraph's ``BaseStore`` over a convomem store database (see the module docstring).

    ``db`` is what ``open_store`` (``batch`` and ``abatch``) or ``aopen_store`` (``abatch``
    only) returns; ``recall`` a ``RecallIndex`` / ``AsyncRecallIndex`` over it (needs
    ``user_at``); ``clock`` the time source of TTLs and item times (inject one in tests).
    """

    supports_ttl = True

    def __init__(
        self,
        db: Any,
        *,
        user_at: int | None = None,
        tenant: str | None = None,
        recall: Any = None,
        fields: Sequence[str] | None = None,
        ttl: TTLConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not callable(getattr(db, "session", None)) or not hasattr(db, "sessions"):
            raise ConfigError(f"db={db!r}: must be a store database (open_store / aopen_store)")
        if user_at is not None and (
            isinstance(user_at, bool) or not isinstance(user_at, int) or user_at < 0
        ):
            raise ConfigError(f"user_at={user_at!r}: must be a namespace position (0, 1, ...)")
        if recall is not None and user_at is None:
            raise ConfigError(
                "recall=: recall is per user; say where namespaces name it (user_at=)"
            )
        if recall is not None and getattr(recall, "db", None) is not db:
            raise ConfigError("recall=: must be an index over this store's database (db=)")
        self.db = db
        self.tenant = tenant
        self.recall = recall
        self.ttl_config = ttl
        self._async = _io.is_async_callable(db.sessions)
        self._layout = Layout(user_at, list(fields or ["$"]), recall is not None, clock)
        self._sweeper: threading.Thread | None = None
        self._stop = threading.Event()

    # -- I/O: the one place the sync and async paths differ ----------------------------

    def _perform(self, req: Request) -> Any:
        db, tenant = self.db, self.tenant
        if isinstance(req, Read):
            return db.session(req.sid, user_id=req.user, tenant=tenant).info()
        if isinstance(req, Write):
            return db.session(req.sid, user_id=req.user, tenant=tenant).set_metadata(req.meta)
        if isinstance(req, Drop):
            return db.delete_session(req.sid, user_id=req.user, tenant=tenant)
        if isinstance(req, List):
            return db.sessions(user_id=req.user, tenant=tenant, cursor=req.cursor, limit=PAGE)
        if isinstance(req, Index):
            self.recall.delete(user_id=req.user, session_id=req.sid, tenant=tenant)
            if req.messages:
                self.recall.add(
                    req.messages, user_id=req.user, session_id=req.sid, tenant=tenant, kind=KIND
                )
            return None
        return self.recall.search(req.query, user_id=req.user, k=req.k, tenant=tenant, kinds=KIND)

    async def _aperform(self, req: Request) -> Any:
        if not self._async:  # a sync database: off the event loop
            return await asyncio.to_thread(self._perform, req)
        db, tenant = self.db, self.tenant
        if isinstance(req, Read):
            return await db.session(req.sid, user_id=req.user, tenant=tenant).info()
        if isinstance(req, Write):
            store = db.session(req.sid, user_id=req.user, tenant=tenant)
            return await store.set_metadata(req.meta)
        if isinstance(req, Drop):
            return await db.delete_session(req.sid, user_id=req.user, tenant=tenant)
        if isinstance(req, List):
            return await db.sessions(user_id=req.user, tenant=tenant, cursor=req.cursor, limit=PAGE)
        if isinstance(req, Index):
            await self.recall.delete(user_id=req.user, session_id=req.sid, tenant=tenant)
            if req.messages:
                await self.recall.add(
                    req.messages, user_id=req.user, session_id=req.sid, tenant=tenant, kind=KIND
                )
            return None
        return await self.recall.search(
            req.query, user_id=req.user, k=req.k, tenant=tenant, kinds=KIND
        )

    # -- the BaseStore API -------------------------------------------------------------

    def _steps(self, op: Op) -> Steps:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            return get(self._layout, op)
        if isinstance(op, PutOp):
            return put(self._layout, op)
        if isinstance(op, SearchOp):
            return search(self._layout, op, matches)
        if isinstance(op, ListNamespacesOp):
            return namespaces(self._layout, op)
        raise ConfigError(f"op={op!r}: not a LangGraph store operation")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (needs a sync database)."""
        if self._async:
            raise ConfigError(f"db={self.db!r}: an async database; use the async methods")
        return [_io.drive(self._steps(op), self._perform) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order."""
        return [await _io.adrive(self._steps(op), self._aperform) for op in ops]

    # -- TTL -----------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete the expired items (their recall entries with them); how many."""
        if self._async:
            raise ConfigError(f"db={self.db!r}: an async database; use asweep_ttl()")
        return int(_io.drive(sweep(self._layout), self._perform))

    async def asweep_ttl(self) -> int:
        """Async twin of ``sweep_ttl``."""
        return int(await _io.adrive(sweep(self._layout), self._aperform))

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep now, then every ``sweep_interval_minutes`` (default: the TTL config's
        ``sweep_interval_minutes``) in a daemon thread until ``stop_ttl_sweeper``. The
        future resolves when the thread ends."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        if not minutes or (self._sweeper is not None and self._sweeper.is_alive()):
            done.set_result(None)
            return done
        self._stop.clear()

        def loop() -> None:
            try:
                while True:
                    self.sweep_ttl()
                    if self._stop.wait(60.0 * float(minutes)):
                        break
                done.set_result(None)
            except BaseException as exc:
                done.set_exception(exc)

        self._sweeper = threading.Thread(target=loop, name="convomem-ttl-sweeper", daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; whether it ended within ``timeout`` seconds."""
        self._stop.set()
        if self._sweeper is None:
            return True
        self._sweeper.join(timeout)
        return not self._sweeper.is_alive()

    def __repr__(self) -> str:
        return f"ConvomemStore({self.db!r}, tenant={self.tenant!r})"
