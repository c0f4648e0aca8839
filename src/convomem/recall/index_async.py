"""``AsyncRecallIndex``: the async twin of ``RecallIndex`` over ``aopen_store``'s
databases. The same sans-I/O logic (``_core``) is driven with ``_io.adrive``: async
embedders are awaited, the store's async driver runs the statements (psycopg's async
connections for PostgreSQL, the store's worker threads for SQLite)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import _io
from ..errors import ConfigError
from ..model import Message
from ..stores.database import AsyncStoreDatabase
from ..summaries.supersession import FactHistory
from ._core import (
    Db,
    Embed,
    Hit,
    Planned,
    plan_add,
    scope_of,
)
from ._facts_table import UserFacts, history_of
from ._setup import (
    _backend,
    _check_delete,
    _check_url,
    _facts_table,
    _kind_of,
    _Options,
    check_save,
    delete_op,
    erase_op,
    facts_op,
)
from .embedders import EmbedderLike, embedder_named
from .fusion import RRF_K

__all__ = ["AsyncRecallIndex"]


def _async_runner(kind: str, db: Any) -> Callable[[Db], Any]:
    if kind == "sqlite":
        from ..stores._sqlite_calls import Call
        from ._sqlite_recall import perform

        async def run_sqlite(req: Db) -> Any:
            def fn(tx: Any) -> Any:
                return _io.drive(req.op(), lambda q: perform(tx.conn, q))

            return await db._arun(Call(fn, req.write))

        return run_sqlite
    from ..stores._pg_calls import Call as PgCall
    from ..stores._pg_ops import in_tx

    async def run_pg(req: Db) -> Any:
        return await db._arun(PgCall(lambda tx: in_tx(tx, req.op()) if req.write else req.op()))

    return run_pg


class AsyncRecallIndex:
    """The async twin of ``RecallIndex`` (same options and semantics); ``db`` is an
    ``AsyncStoreDatabase`` from ``aopen_store``, or use ``await AsyncRecallIndex.open(url)``.
    Its tables are made on first use."""

    def __init__(
        self,
        db: AsyncStoreDatabase,
        *,
        embedder: EmbedderLike | str | None = None,
        candidates: int = 50,
        rrf_k: int = RRF_K,
        cache_size: int = 100_000,
        batch_size: int = 256,
        clock: Callable[[], float] = time.time,
        vector_weight: float | None = None,
        keys: Sequence[str] | None = None,
        rerank: bool = True,
        fusion: str = "linear",
    ) -> None:
        named = embedder_named(embedder) if isinstance(embedder, str) else embedder
        self._opts = _Options(
            named,
            candidates,
            rrf_k,
            cache_size,
            batch_size,
            clock,
            vector_weight,
            keys,
            rerank,
            fusion,
        )
        kind = _kind_of(db)
        if not type(db).__name__.startswith("Async"):
            raise ConfigError(f"db={db!r}: a sync database; use RecallIndex")
        self.db = db
        self._owned = False
        self.backend = _backend(kind, self._opts.np, db, self._opts.embedder)
        self._run_db = _async_runner(kind, db)
        self.facts_table = _facts_table(kind, db)
        self._ready = False
        self._lock = _io.LoopLock()
        self._pending: set[asyncio.Task[Any]] = set()
        self._errors: list[BaseException] = []

    @classmethod
    async def open(cls, url: str, **options: Any) -> AsyncRecallIndex:
        """An index over the database ``url`` names, opened (and closed by ``aclose``)."""
        from ..stores.opening import aopen_store

        _check_url(url)
        db = await aopen_store(url)
        try:
            index = cls(db, **options)
        except BaseException:
            await db.aclose()
            raise
        index._owned = True
        return index

    @property
    def embedded(self) -> int:
        """Texts embedded since the index was made (each distinct text once; queries
        apart from messages when the embedder embeds them apart, ``embed_query``)."""
        return self._opts.embedded()

    async def prepare(self) -> None:
        """Create the index's tables now (else on first use), so a database that cannot
        hold them (PostgreSQL without pgvector: a ``ConfigError`` saying so) fails here,
        before any request needs them."""
        if not self._ready:
            async with self._lock.get():
                if not self._ready:
                    await self._run_db(Db(self.backend.migrate, True))
                    await self._run_db(Db(self.facts_table.migrate, True))
                    self._ready = True

    async def _perform(self, req: Embed | Db) -> Any:
        if isinstance(req, Embed):
            return await self._opts.cache_for(req).avectors(req.messages)
        await self.prepare()
        return await self._run_db(req)

    async def add(
        self,
        messages: Sequence[Message],
        *,
        user_id: str,
        session_id: str,
        tenant: str | None = None,
        seqs: Sequence[int] | None = None,
        kind: str | None = None,
    ) -> int:
        """Index ``messages`` now; how many were new (see ``RecallIndex.add``)."""
        plan = plan_add(messages, user_id, session_id, tenant, seqs, kind)
        return int(await self._add(plan))

    async def _add(self, plan: Planned) -> Any:
        return await _io.adrive(self._opts.add_gen(self.backend, plan), self._perform)

    def submit(
        self,
        messages: Sequence[Message],
        *,
        user_id: str,
        session_id: str,
        tenant: str | None = None,
        seqs: Sequence[int] | None = None,
        kind: str | None = None,
    ) -> None:
        """``add`` in a background task of the running loop: returns at once (bad input
        still raises here); ``await aflush()`` waits for everything submitted."""
        plan = plan_add(messages, user_id, session_id, tenant, seqs, kind)
        task = asyncio.get_running_loop().create_task(self._add(plan))
        self._pending.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._errors.append(task.exception())  # type: ignore[arg-type]

    async def aflush(self) -> None:
        """Wait until every submitted message is indexed; raise the first failure since
        the last flush."""
        while self._pending:
            await asyncio.wait(list(self._pending))
        errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    async def search(
        self,
        query: str,
        *,
        user_id: str,
        k: int = 10,
        tenant: str | None = None,
        kinds: Sequence[str] | str | None = None,
        as_of: float | None = None,
        neighbours: int = 0,
        distinct: bool = True,
    ) -> list[Hit]:
        """The ``k`` best items of ``user_id`` for ``query`` (see ``RecallIndex.search``)."""
        gen = self._opts.search_gen(
            self.backend, query, user_id, tenant, k, kinds, as_of, neighbours, distinct
        )
        hits: list[Hit] = await _io.adrive(gen, self._perform)
        return hits

    async def delete(
        self,
        *,
        user_id: str,
        session_id: str | None = None,
        message_ids: Sequence[str] | None = None,
        tenant: str | None = None,
    ) -> int:
        """Delete items, and a whole session's facts (see ``RecallIndex.delete``); how
        many items."""
        scope, sid, ids = _check_delete(user_id, session_id, message_ids, tenant)
        now = self._opts.clock()
        table = self.facts_table
        n: int = await self._perform(
            Db(lambda: delete_op(self.backend, table, scope, sid, ids, now), True)
        )
        return n

    async def erase_user(self, user_id: str, *, tenant: str | None = None) -> int:
        """Delete every item of ``user_id`` in ``tenant``, and the user's facts; how many
        items."""
        scope = scope_of(user_id, tenant)
        n: int = await self._perform(
            Db(lambda: erase_op(self.backend, self.facts_table, scope), True)
        )
        return n

    async def expired_sessions(self, user_id: str, *, tenant: str | None = None) -> frozenset[str]:
        """The ids of the user's sessions expired now (``stores.expiry``), whose items
        ``search`` does not find and whose facts ``facts`` does not serve: what a cache
        of anything read from them must be checked against."""
        scope = scope_of(user_id, tenant)
        now = self._opts.clock()
        gone = await self._perform(Db(lambda: self.backend.expired(scope, now), False))
        return frozenset(gone)

    async def facts(self, user_id: str, *, tenant: str | None = None, **options: Any) -> UserFacts:
        """The long-term facts of ``user_id`` (see ``RecallIndex.facts``)."""
        scope = scope_of(user_id, tenant)
        now = self._opts.clock()
        op = Db(lambda: facts_op(self.backend, self.facts_table, scope, now), False)
        loaded, gone = await self._perform(op)
        return history_of(loaded, scope, tenant, gone, **options)

    async def facts_version(self, user_id: str, *, tenant: str | None = None) -> int:
        """The stored facts version of ``user_id`` (see ``RecallIndex.facts_version``)."""
        scope = scope_of(user_id, tenant)
        n: int = await self._perform(Db(lambda: self.facts_table.version(scope), False))
        return n

    async def save_facts(
        self,
        user_id: str,
        history: FactHistory,
        *,
        tenant: str | None = None,
        expected_version: int | None = None,
    ) -> int:
        """Store the facts of ``user_id``; the new version (see ``RecallIndex.save_facts``)."""
        scope, state, expected = check_save(user_id, history, tenant, expected_version)
        now = self._opts.clock()
        n: int = await self._perform(
            Db(lambda: self.facts_table.save(scope, state, expected, now), True)
        )
        if isinstance(history, UserFacts):
            history.version = n
        return n

    async def aclose(self) -> None:
        """Finish the submitted work; close the database if the index opened it."""
        if self._pending:
            await asyncio.wait(list(self._pending))
        if self._owned:
            await self.db.aclose()

    async def __aenter__(self) -> AsyncRecallIndex:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
