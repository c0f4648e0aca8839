"""The ``SessionStore`` / ``AsyncSessionStore`` methods, written once for every backend.

A backend's session class mixes its operations (``_get_items``, ``_append``, ... : each
builds the backend's sans-I/O operation) with ``SessionAPI`` (sync) or
``AsyncSessionAPI`` (async), and implements the one hook they call to run an operation,
``_run`` or ``_arun``, in its database's own module (where the database's runner is its
own business). The semantics of each method are in ``convomem.stores.database``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model import Message
from .database import Counts, LogEntry, SessionInfo

__all__ = ["AsyncSessionAPI", "SessionAPI"]


class _Operations:
    """What a backend's operations mixin provides (each returns its sans-I/O operation)."""

    __slots__ = ()

    def _get_items(self, limit: int | None) -> Any: ...
    def _append(
        self,
        messages: Sequence[Message],
        expected_seq: int | None,
        state: Mapping[str, Any] | None,
        expected_version: int | None,
        counts: Counts | None,
    ) -> Any: ...
    def _pop_item(self) -> Any: ...
    def _clear_session(self) -> Any: ...
    def _truncate(self, keep: int) -> Any: ...
    def _entries(self, cursor: str | None, limit: int, newest_first: bool) -> Any: ...
    def _last_seq(self) -> Any: ...
    def _load_state(self) -> Any: ...
    def _save_state(self, state: Mapping[str, Any] | None, expected_version: int) -> Any: ...
    def _set_counts(self, counts: Counts) -> Any: ...
    def _get_counts(self, message_ids: Sequence[str] | None) -> Any: ...
    def _info(self) -> Any: ...
    def _set_metadata(self, metadata: Mapping[str, Any]) -> Any: ...


class SessionAPI(_Operations):
    """The sync methods of a session store."""

    __slots__ = ()

    def _run(self, op: Any) -> Any:
        """Run one of this session's operations (the backend's session implements it)."""
        raise NotImplementedError

    def get_items(self, limit: int | None = None) -> list[Message]:
        """The messages oldest first; with ``limit``, the newest ``limit`` of them."""
        result: list[Message] = self._run(self._get_items(limit))
        return result

    def add_items(self, items: Sequence[Message]) -> None:
        """Append messages, all or nothing (``append`` without its options)."""
        self._run(self._append(items, None, None, None, None))

    def pop_item(self) -> Message | None:
        """Remove and return the newest message (None when the log is empty)."""
        result: Message | None = self._run(self._pop_item())
        return result

    def clear_session(self) -> None:
        """Remove every message and the derived state (the session itself stays)."""
        self._run(self._clear_session())

    def truncate(self, keep: int) -> None:
        """Keep only the oldest ``keep`` messages, atomically."""
        self._run(self._truncate(keep))

    def append(
        self,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        state: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        counts: Counts | None = None,
    ) -> int:
        """Append ``messages`` (and ``state``, and the batch's token ``counts``) in one
        transaction; the seq of the batch's last message."""
        op = self._append(messages, expected_seq, state, expected_version, counts)
        result: int = self._run(op)
        return result

    def page(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[Message], str | None]:
        """``limit`` messages after ``cursor`` (oldest first), or before it walking
        back from the newest (``newest_first``, newest first); and the next cursor."""
        entries, next_cursor = self.entries(cursor, limit, newest_first)
        return [e.message for e in entries], next_cursor

    def entries(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[LogEntry], str | None]:
        """``page`` with each message's seq and token counts."""
        result: tuple[list[LogEntry], str | None]
        result = self._run(self._entries(cursor, limit, newest_first))
        return result

    def last_seq(self) -> int:
        """The newest live message's seq (0 when empty): what ``expected_seq`` takes."""
        result: int = self._run(self._last_seq())
        return result

    def load_state(self) -> tuple[dict[str, Any] | None, int]:
        """The derived state (None if never saved) and its version."""
        result: tuple[dict[str, Any] | None, int] = self._run(self._load_state())
        return result

    def save_state(self, state: Mapping[str, Any] | None, *, expected_version: int) -> int:
        """Replace the derived state if its version is ``expected_version``; the new one."""
        result: int = self._run(self._save_state(state, expected_version))
        return result

    def set_counts(self, counts: Counts) -> None:
        """Store token counts: ``{message_id: {tokenizer_name: n}}`` (merged)."""
        self._run(self._set_counts(counts))

    def get_counts(self, message_ids: Sequence[str] | None = None) -> dict[str, dict[str, int]]:
        """Stored token counts of these messages (every message when None)."""
        result: dict[str, dict[str, int]] = self._run(self._get_counts(message_ids))
        return result

    def info(self) -> SessionInfo | None:
        """The session's record, or None if it does not exist (or expired)."""
        result: SessionInfo | None = self._run(self._info())
        return result

    def set_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Replace the session's metadata (a JSON object)."""
        self._run(self._set_metadata(metadata))


class AsyncSessionAPI(_Operations):
    """The coroutine twins of ``SessionAPI``'s methods."""

    __slots__ = ()

    async def _arun(self, op: Any) -> Any:
        """Run one of this session's operations (the backend's session implements it)."""
        raise NotImplementedError

    async def get_items(self, limit: int | None = None) -> list[Message]:
        """The messages oldest first; with ``limit``, the newest ``limit`` of them."""
        result: list[Message] = await self._arun(self._get_items(limit))
        return result

    async def add_items(self, items: Sequence[Message]) -> None:
        """Append messages, all or nothing (``append`` without its options)."""
        await self._arun(self._append(items, None, None, None, None))

    async def pop_item(self) -> Message | None:
        """Remove and return the newest message (None when the log is empty)."""
        result: Message | None = await self._arun(self._pop_item())
        return result

    async def clear_session(self) -> None:
        """Remove every message and the derived state (the session itself stays)."""
        await self._arun(self._clear_session())

    async def truncate(self, keep: int) -> None:
        """Keep only the oldest ``keep`` messages, atomically."""
        await self._arun(self._truncate(keep))

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
        op = self._append(messages, expected_seq, state, expected_version, counts)
        result: int = await self._arun(op)
        return result

    async def page(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[Message], str | None]:
        """A page of messages and the next cursor (see ``SessionAPI.page``)."""
        entries, next_cursor = await self.entries(cursor, limit, newest_first)
        return [e.message for e in entries], next_cursor

    async def entries(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[LogEntry], str | None]:
        """``page`` with each message's seq and token counts."""
        result: tuple[list[LogEntry], str | None]
        result = await self._arun(self._entries(cursor, limit, newest_first))
        return result

    async def last_seq(self) -> int:
        """The newest live message's seq (0 when empty)."""
        result: int = await self._arun(self._last_seq())
        return result

    async def load_state(self) -> tuple[dict[str, Any] | None, int]:
        """The derived state (None if never saved) and its version."""
        result: tuple[dict[str, Any] | None, int] = await self._arun(self._load_state())
        return result

    async def save_state(self, state: Mapping[str, Any] | None, *, expected_version: int) -> int:
        """Replace the derived state if its version is ``expected_version``."""
        result: int = await self._arun(self._save_state(state, expected_version))
        return result

    async def set_counts(self, counts: Counts) -> None:
        """Store token counts: ``{message_id: {tokenizer_name: n}}`` (merged)."""
        await self._arun(self._set_counts(counts))

    async def get_counts(
        self, message_ids: Sequence[str] | None = None
    ) -> dict[str, dict[str, int]]:
        """Stored token counts of these messages (every message when None)."""
        result: dict[str, dict[str, int]] = await self._arun(self._get_counts(message_ids))
        return result

    async def info(self) -> SessionInfo | None:
        """The session's record, or None if it does not exist (or expired)."""
        result: SessionInfo | None = await self._arun(self._info())
        return result

    async def set_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Replace the session's metadata (a JSON object)."""
        await self._arun(self._set_metadata(metadata))
