"""The ``StoreDatabase`` / ``AsyncStoreDatabase`` methods, and ``run_statements``, written
once for every backend.

A backend's database class mixes the call builders of its calls module
(``DatabaseCalls``: ``_sessions``, ``_delete_session``, ... each checks its arguments
and builds the backend's sans-I/O operation) with ``DatabaseAPI`` (sync) or
``AsyncDatabaseAPI`` (async), and implements the hook that runs an operation, ``_run``
or ``_arun``, with its own driver; ``_reclaim`` when a deletion leaves space to give
back (SQLite's write-ahead log). The semantics of each method are in
``convomem.stores.database``; ``SessionAPI`` is the same shape for one session.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Self, TypeVar

from ._calls import check_statements
from .database import SessionInfo

__all__ = ["AsyncDatabaseAPI", "DatabaseAPI"]

T = TypeVar("T")


class _Builders:
    """What a backend's ``DatabaseCalls`` provides (each returns its sans-I/O operation)."""

    __slots__ = ()

    url: str

    def _sessions(self, user_id: object, tenant: object, cursor: object, limit: object) -> Any: ...
    def _tenant_counts(self, user_id: object) -> Any: ...
    def _delete_session(self, session_id: object, user_id: object, tenant: object) -> Any: ...
    def _erase_user(self, user_id: object, tenant: object) -> Any: ...
    def _sweep(self) -> Any: ...
    def _statements(self, op: Callable[[], Generator[Any, Any, Any]], write: bool) -> Any: ...

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"


class DatabaseAPI(_Builders):
    """The sync methods of a store database."""

    __slots__ = ()

    def _run(self, op: Any) -> Any:
        """Run one operation under the retry policy (the backend's database implements it)."""
        raise NotImplementedError

    def _reclaim(self) -> None:
        """Give back the space a deletion left (nothing, unless the backend says so)."""

    def close(self) -> None:
        """Close every connection (the backend's database implements it)."""
        raise NotImplementedError

    def sessions(
        self,
        *,
        user_id: str | None = None,
        tenant: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> tuple[list[SessionInfo], str | None]:
        """Sessions of ``tenant`` (of ``user_id`` when given), newest created first;
        pass the returned cursor back for the next page (None: no more)."""
        result: tuple[list[SessionInfo], str | None]
        result = self._run(self._sessions(user_id, tenant, cursor, limit))
        return result

    def tenant_counts(self, *, user_id: str | None = None) -> dict[str | None, int]:
        """Live sessions per tenant (``None``: no tenant), of ``user_id`` when given. It
        reads every session's record: for administration (``convomem sessions list``
        says where sessions are), not for a request path."""
        result: dict[str | None, int] = self._run(self._tenant_counts(user_id))
        return result

    def delete_session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> bool:
        """Delete a session with its log, state and counts; whether it existed."""
        deleted: bool = self._run(self._delete_session(session_id, user_id, tenant))
        self._reclaim()
        return deleted

    def erase_user(self, user_id: str, *, tenant: str | None = None) -> int:
        """Delete every session ``user_id`` owns in ``tenant``; how many there were."""
        erased: int = self._run(self._erase_user(user_id, tenant))
        self._reclaim()
        return erased

    def sweep(self) -> int:
        """Delete the expired sessions (and, in Redis, the index entries of sessions
        gone); how many sessions."""
        swept: int = self._run(self._sweep())
        if swept:
            self._reclaim()
        return swept

    def run_statements(self, op: Callable[[], Generator[Any, Any, T]], *, write: bool = False) -> T:
        """Run an operation of the caller's own (``stores.statements``: a fresh
        generator of ``op()`` per attempt) with this database's retries, error mapping
        and work counts; with ``write``, in one write transaction. What it returns."""
        result: T = self._run(self._statements(op, check_statements(op, write)))
        return result

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncDatabaseAPI(_Builders):
    """The coroutine twins of ``DatabaseAPI``'s methods."""

    __slots__ = ()

    async def _arun(self, op: Any) -> Any:
        """Run one operation under the retry policy (the backend's database implements it)."""
        raise NotImplementedError

    async def _reclaim(self) -> None:
        """Give back the space a deletion left (nothing, unless the backend says so)."""

    async def aclose(self) -> None:
        """Close every connection (the backend's database implements it)."""
        raise NotImplementedError

    async def sessions(
        self,
        *,
        user_id: str | None = None,
        tenant: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> tuple[list[SessionInfo], str | None]:
        """Sessions of ``tenant`` (of ``user_id`` when given), newest created first."""
        result: tuple[list[SessionInfo], str | None]
        result = await self._arun(self._sessions(user_id, tenant, cursor, limit))
        return result

    async def tenant_counts(self, *, user_id: str | None = None) -> dict[str | None, int]:
        """Live sessions per tenant (``None``: no tenant), of ``user_id`` when given (for
        administration: it reads every session's record)."""
        result: dict[str | None, int] = await self._arun(self._tenant_counts(user_id))
        return result

    async def delete_session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> bool:
        """Delete a session with its log, state and counts; whether it existed."""
        deleted: bool = await self._arun(self._delete_session(session_id, user_id, tenant))
        await self._reclaim()
        return deleted

    async def erase_user(self, user_id: str, *, tenant: str | None = None) -> int:
        """Delete every session ``user_id`` owns in ``tenant``; how many there were."""
        erased: int = await self._arun(self._erase_user(user_id, tenant))
        await self._reclaim()
        return erased

    async def sweep(self) -> int:
        """Delete the expired sessions; how many."""
        swept: int = await self._arun(self._sweep())
        if swept:
            await self._reclaim()
        return swept

    async def run_statements(
        self, op: Callable[[], Generator[Any, Any, T]], *, write: bool = False
    ) -> T:
        """``DatabaseAPI.run_statements``, awaited."""
        result: T = await self._arun(self._statements(op, check_statements(op, write)))
        return result

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
