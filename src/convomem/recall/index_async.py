"""``AsyncRecallIndex``: the async twin of ``RecallIndex`` over ``aopen_store``'s
databases. The same sans-I/O logic (``_core``) is driven with ``_io.adrive``: async
embedders are awaited, the store's async driver runs the statements (psycopg's async
connections for PostgreSQL, the store's worker threads for SQLite)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

from .. import _io
from ..errors import ConfigError
from ..model import Message
from ..stores.database import AsyncStoreDatabase
from ..summaries.supersession import FactHistory
from ._backend import Hit
from ._core import Db, Embed, Planned, plan_add
from ._facts_table import UserFacts
from ._setup import IndexBase, check_url

__all__ = ["AsyncRecallIndex"]


class AsyncRecallIndex(IndexBase):
    """The async twin of ``RecallIndex`` (same options and semantics); ``db`` is an
    ``AsyncStoreDatabase`` from ``aopen_store``, or use ``await AsyncRecallIndex.open(url)``.
    Its tables are made on first use."""

    asynchronous: ClassVar[bool] = True
    db: AsyncStoreDatabase

    def _database(self, db: object) -> Any:
        self._owned = False  # (``open`` makes an index that owns its database)
        if isinstance(db, str):
            raise ConfigError(f"db={db!r}: a URL; use await AsyncRecallIndex.open(url)")
        return db

    def _start(self) -> None:
        self._ready = False
        self._lock = _io.LoopLock()
        self._pending: set[asyncio.Task[Any]] = set()
        self._errors: list[BaseException] = []

    @classmethod
    async def open(cls, url: str, **options: Any) -> AsyncRecallIndex:
        """An index over the database ``url`` names, opened (and closed by ``aclose``)."""
        from ..stores.opening import aopen_store

        check_url(url)
        db = await aopen_store(url)
        try:
            index = cls(db, **options)
        except BaseException:
            await db.aclose()
            raise
        index._owned = True
        return index

    async def prepare(self) -> None:
        """Create the index's tables now (else on first use), so a database that cannot
        hold them (PostgreSQL without pgvector: a ``ConfigError`` saying so) fails here,
        before any request needs them."""
        if not self._ready:
            async with self._lock.get():
                if not self._ready:
                    for migration in self._migrations():
                        await self._run_db(migration)
                    self._ready = True

    async def _run_db(self, req: Db) -> Any:
        return await self.db.run_statements(req.op, write=req.write)

    async def _perform(self, req: Embed | Db) -> Any:
        if isinstance(req, Embed):
            return await self._embed(req).avectors(req.messages)
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
        return await _io.adrive(self._add_gen(plan), self._perform)

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
        gen = self._search_gen(query, user_id, k, tenant, kinds, as_of, neighbours, distinct)
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
        n: int = await self._perform(self._delete(user_id, session_id, message_ids, tenant))
        return n

    async def erase_user(self, user_id: str, *, tenant: str | None = None) -> int:
        """Delete every item of ``user_id`` in ``tenant``, and the user's facts; how many
        items."""
        n: int = await self._perform(self._erase(user_id, tenant))
        return n

    async def expired_sessions(self, user_id: str, *, tenant: str | None = None) -> frozenset[str]:
        """The ids of the user's sessions expired now (``stores.expiry``), whose items
        ``search`` does not find and whose facts ``facts`` does not serve: what a cache
        of anything read from them must be checked against."""
        return frozenset(await self._perform(self._expired(user_id, tenant)))

    async def facts(self, user_id: str, *, tenant: str | None = None, **options: Any) -> UserFacts:
        """The long-term facts of ``user_id`` (see ``RecallIndex.facts``)."""
        read, done = self._facts(user_id, tenant, options)
        return done(await self._perform(read))

    async def facts_version(self, user_id: str, *, tenant: str | None = None) -> int:
        """The stored facts version of ``user_id`` (see ``RecallIndex.facts_version``)."""
        n: int = await self._perform(self._facts_version(user_id, tenant))
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
        save, done = self._save_facts(user_id, history, tenant, expected_version)
        return done(await self._perform(save))

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
