"""The async twin of the SQLite store: the same calls, run in worker threads.

``await aopen_store("sqlite:///chat.db")`` gives an ``AsyncSQLiteDatabase``; its
sessions are ``AsyncStore`` s (``AsyncSessionStore``). Every call is built and checked by
the same code as the sync one (``_sqlite_calls``) and runs the same SQLite operation, on
a connection of its own worker thread (``workers`` of them, 4 by default), so the event
loop never blocks on SQLite. Transient failures are retried by the same
``RetryPolicy``, waiting with ``asyncio.sleep``.

Cancelling a call stops the wait, not the operation: a write already handed to its
thread commits or not as a whole. Appends are idempotent, so a caller that does not know
may safely send the batch again.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .. import _check
from ..errors import StoreError
from ..model import Message
from . import _sqlite_ops as ops
from ._sqlite_calls import (
    Call,
    SessionCalls,
    check_session_key,
    delete_session_call,
    erase_user_call,
    sessions_call,
    sweep_call,
)
from .database import Counts, LogEntry, SessionInfo, StoreStats, TTLPolicy
from .sqlite import SQLiteDatabase

__all__ = ["AsyncSQLiteDatabase", "AsyncSQLiteSession"]

T = TypeVar("T")


class AsyncSQLiteDatabase:
    """Sessions in one SQLite file (or in memory), for asyncio; see ``SQLiteDatabase``
    for the options. Make one with ``await AsyncSQLiteDatabase.open(path, ...)`` or
    ``await aopen_store(url)``."""

    def __init__(self, core: SQLiteDatabase, executor: ThreadPoolExecutor) -> None:
        self._core = core
        self._executor = executor
        self.url: str = core.url
        self.path: str | None = core.path
        self.ttl: TTLPolicy = core.ttl

    @classmethod
    async def open(
        cls, path: str | None = None, *, workers: int = 4, **options: Any
    ) -> AsyncSQLiteDatabase:
        """Open (and migrate) the database in a worker thread."""
        n = _check.positive_int("workers", workers)
        executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="convomem-sqlite")
        try:
            loop = asyncio.get_running_loop()
            core = await loop.run_in_executor(
                executor, functools.partial(SQLiteDatabase, path, **options)
            )
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(core, executor)

    async def _arun(self, call: Call[T]) -> T:
        loop = asyncio.get_running_loop()
        core = self._core

        def attempt() -> asyncio.Future[T]:
            try:
                return loop.run_in_executor(self._executor, core._attempt, call.fn, call.write)
            except RuntimeError:  # the executor is shut down
                raise StoreError(f"{core._where()}: the database is closed") from None

        result: T = await core._retry.acall(attempt)
        return result

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> AsyncSQLiteSession:
        """The session ``session_id`` of ``tenant``, acting for ``user_id`` (no I/O)."""
        return AsyncSQLiteSession(self, check_session_key(session_id, user_id, tenant))

    async def sessions(
        self,
        *,
        user_id: str | None = None,
        tenant: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> tuple[list[SessionInfo], str | None]:
        """Sessions of ``tenant`` (of ``user_id`` when given), newest created first."""
        return await self._arun(sessions_call(user_id, tenant, cursor, limit))

    async def delete_session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> bool:
        """Delete a session with its log, state and counts; whether it existed."""
        return await self._arun(delete_session_call(session_id, user_id, tenant))

    async def erase_user(self, user_id: str, *, tenant: str | None = None) -> int:
        """Delete every session ``user_id`` owns in ``tenant``; how many there were."""
        erased = await self._arun(erase_user_call(user_id, tenant))
        await asyncio.get_running_loop().run_in_executor(self._executor, self._core._checkpoint)
        return erased

    async def sweep(self) -> int:
        """Delete the expired sessions; how many."""
        return await self._arun(sweep_call())

    def stats(self) -> StoreStats:
        """Statements, write transactions and rows read since the database was opened."""
        return self._core.stats()

    def close(self) -> None:
        """Wait for the running calls, then close every connection."""
        self._executor.shutdown(wait=True)
        self._core.close()

    async def aclose(self) -> None:
        """``close`` without blocking the event loop."""
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    async def __aenter__(self) -> AsyncSQLiteDatabase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AsyncSQLiteDatabase {self.url}>"


class AsyncSQLiteSession(SessionCalls):
    """One session of an ``AsyncSQLiteDatabase`` (an ``AsyncSessionStore``); each method
    is the coroutine twin of ``SQLiteSession``'s."""

    __slots__ = ("_db",)

    def __init__(self, db: AsyncSQLiteDatabase, key: ops.Key) -> None:
        super().__init__(key)
        self._db = db

    async def get_items(self, limit: int | None = None) -> list[Message]:
        """The messages oldest first; with ``limit``, the newest ``limit`` of them."""
        return await self._db._arun(self._get_items(limit))

    async def add_items(self, items: Sequence[Message]) -> None:
        """Append messages, all or nothing."""
        await self._db._arun(self._append(items, None, None, None, None))

    async def pop_item(self) -> Message | None:
        """Remove and return the newest message (None when the log is empty)."""
        return await self._db._arun(self._pop_item())

    async def clear_session(self) -> None:
        """Remove every message and the derived state (the session itself stays)."""
        await self._db._arun(self._clear_session())

    async def truncate(self, keep: int) -> None:
        """Keep only the oldest ``keep`` messages, atomically."""
        await self._db._arun(self._truncate(keep))

    async def append(
        self,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        state: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        counts: Counts | None = None,
    ) -> int:
        """Append ``messages`` (and ``state`` and ``counts``) in one transaction."""
        call = self._append(messages, expected_seq, state, expected_version, counts)
        return await self._db._arun(call)

    async def page(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[Message], str | None]:
        """A page of messages and the next cursor (see ``SQLiteSession.page``)."""
        entries, next_cursor = await self._db._arun(self._entries(cursor, limit, newest_first))
        return [e.message for e in entries], next_cursor

    async def entries(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[LogEntry], str | None]:
        """``page`` with each message's seq and token counts."""
        return await self._db._arun(self._entries(cursor, limit, newest_first))

    async def last_seq(self) -> int:
        """The newest live message's seq (0 when empty)."""
        return await self._db._arun(self._last_seq())

    async def load_state(self) -> tuple[dict[str, Any] | None, int]:
        """The derived state (None if never saved) and its version."""
        return await self._db._arun(self._load_state())

    async def save_state(self, state: Mapping[str, Any] | None, *, expected_version: int) -> int:
        """Replace the derived state if its version is ``expected_version``."""
        return await self._db._arun(self._save_state(state, expected_version))

    async def set_counts(self, counts: Counts) -> None:
        """Store token counts: ``{message_id: {tokenizer_name: n}}`` (merged)."""
        await self._db._arun(self._set_counts(counts))

    async def get_counts(
        self, message_ids: Sequence[str] | None = None
    ) -> dict[str, dict[str, int]]:
        """Stored token counts of these messages (every message when None)."""
        return await self._db._arun(self._get_counts(message_ids))

    async def info(self) -> SessionInfo | None:
        """The session's record, or None if it does not exist (or expired)."""
        return await self._db._arun(self._info())

    async def set_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Replace the session's metadata (a JSON object)."""
        await self._db._arun(self._set_metadata(metadata))

    def __repr__(self) -> str:
        return f"<AsyncSQLiteSession {self.session_id!r} of {self._db.url}>"
