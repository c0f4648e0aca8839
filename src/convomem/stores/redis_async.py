"""The async twin of the Redis store (``redis.asyncio``): ``await aopen_store(url)``.

The same operations as ``RedisDatabase`` (``_redis_ops``, ``_redis_admin``), checked by
the same calls (``_redis_calls``), sent with ``await``; transient failures are retried
by the same ``RetryPolicy``, waiting with ``asyncio.sleep``. A database belongs to the
event loop it was opened on. Cancelling a call stops the wait, not a script the server
already runs: it applies whole or not at all, and appends are idempotent, so a caller
that does not know may send the batch again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..errors import StoreError
from ..model import Message
from ..retry import RetryPolicy
from . import _redis_ops as ops
from ._redis_admin import check_layout
from ._redis_calls import (
    RedisCalls,
    delete_session_op,
    erase_user_op,
    parse_target,
    sessions_op,
    sweep_op,
    translate,
)
from .database import Counts, LogEntry, SessionInfo, StoreStats, TTLPolicy
from .redis_store import check_common, missing_redis, ttl_policy

__all__ = ["AsyncRedisDatabase", "AsyncRedisSession"]

T = TypeVar("T")


_COMMAND_TABLES: dict[str, dict[str, Any]] = {}


def _share_command_table(client: Any, where: str) -> None:
    """The async cluster client reads the server's whole ``COMMAND`` table when it
    connects (thousands of lines through a pure-Python parser: most of the time it takes
    to open); databases on the same cluster in one process read it once."""
    parser = getattr(client, "commands_parser", None)
    if parser is None or not hasattr(parser, "initialize"):
        return
    read = parser.initialize

    async def initialize(node: Any = None) -> None:
        if node is not None:
            parser.node = node
        if where in _COMMAND_TABLES:
            parser.commands = _COMMAND_TABLES[where]
            return
        await read(node)
        _COMMAND_TABLES[where] = parser.commands

    parser.initialize = initialize


class AsyncRedisDatabase:
    """Sessions in one Redis server or cluster, for asyncio; see ``RedisDatabase`` for
    the options. Make one with ``await AsyncRedisDatabase.open(url, ...)`` or ``await
    aopen_store(url)``."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str | None = None,
        ttl: float | TTLPolicy | None = None,
        ttl_refresh: str = "write",
        socket_timeout: float = 5.0,
        ssl_ca_certs: str | None = None,
        retry: RetryPolicy | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl = ttl_policy(ttl, ttl_refresh)
        self._retry, self._clock = check_common(retry, clock)
        target = parse_target(url, prefix, socket_timeout, ssl_ca_certs)
        self.url = target.shown
        self.prefix = target.prefix
        self._work = ops.Work()
        try:
            import redis.asyncio as aredis
            import redis.exceptions as rx
            from redis.asyncio.cluster import RedisCluster
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError:
            raise missing_redis() from None
        self._errors: tuple[type[Exception], ...] = (rx.RedisError, rx.RedisClusterException)
        self._noscript = rx.NoScriptError
        options = dict(target.options)
        self._client: Any
        if target.cluster:
            self._client = RedisCluster.from_url(target.connect, **options)
            _share_command_table(self._client, target.connect)
        else:
            self._client = aredis.Redis.from_url(
                target.connect, retry=Retry(NoBackoff(), 0), **options
            )

    @classmethod
    async def open(cls, url: str, *, workers: int | None = None, **options: Any) -> Any:
        """Open the database and check the server answers. ``workers`` is accepted for
        the options every async backend takes, and unused: asyncio needs no threads."""
        db = cls(url, **options)
        try:
            await db._run(check_layout)
        except BaseException:
            await db.aclose()
            raise
        return db

    def _where(self) -> str:
        return f"redis {self.url}"

    # -- the driver ------------------------------------------------------------------

    async def _send(self, request: ops.Request) -> Any:
        client, work = self._client, self._work
        if isinstance(request, ops.Eval):
            s = request.script
            work.add(statements=1)
            try:
                return await client.evalsha(s.sha, len(request.keys), *request.keys, *request.args)
            except self._noscript:
                pass
            work.add(statements=1)
            return await client.eval(s.source, len(request.keys), *request.keys, *request.args)
        if isinstance(request, ops.Command):
            work.add(statements=1)
            return await client.execute_command(*request.args)
        work.add(statements=len(request.commands))
        pipe = client.pipeline(transaction=False)
        for command in request.commands:
            pipe.execute_command(*command)
        return await pipe.execute()

    async def _attempt(self, op: ops.Op[T]) -> T:
        if self._client is None:
            raise StoreError(f"{self._where()}: the database is closed")
        gen = op(ops.Ctx(self._clock(), self.ttl, self.prefix, self._work))
        reply: Any = None
        try:
            while True:
                try:
                    request = gen.send(reply)
                except StopIteration as stop:
                    result: T = stop.value
                    return result
                reply = await self._send(request)
        except self._errors as exc:
            raise translate(exc, self._where()) from exc
        finally:
            gen.close()

    async def _run(self, op: ops.Op[T]) -> T:
        result: T = await self._retry.acall(self._attempt, op)
        return result

    # -- the database ----------------------------------------------------------------

    def session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> AsyncRedisSession:
        """The session ``session_id`` of ``tenant``, acting for ``user_id`` (no I/O)."""
        return AsyncRedisSession(self, session_id, user_id, tenant)

    async def sessions(
        self,
        *,
        user_id: str | None = None,
        tenant: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> tuple[list[SessionInfo], str | None]:
        """Sessions of ``tenant`` (of ``user_id`` when given), newest created first."""
        return await self._run(sessions_op(user_id, tenant, cursor, limit))

    async def delete_session(
        self, session_id: str, *, user_id: str | None = None, tenant: str | None = None
    ) -> bool:
        """Delete a session with its log, state and counts; whether it existed."""
        return await self._run(delete_session_op(session_id, user_id, tenant))

    async def erase_user(self, user_id: str, *, tenant: str | None = None) -> int:
        """Delete every session ``user_id`` owns in ``tenant``; how many there were."""
        return await self._run(erase_user_op(user_id, tenant))

    async def sweep(self) -> int:
        """Delete the expired sessions still stored and the index entries of sessions
        gone; how many sessions."""
        return await self._run(sweep_op())

    def stats(self) -> StoreStats:
        """Commands sent, writes done and rows read since the database was opened."""
        s, t, r = self._work.counts
        return StoreStats(statements=s, transactions=t, rows_read=r)

    async def aclose(self) -> None:
        """Close the connections."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> AsyncRedisDatabase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AsyncRedisDatabase {self.url}>"


class AsyncRedisSession(RedisCalls):
    """One session of an ``AsyncRedisDatabase`` (an ``AsyncSessionStore``); each method
    is the coroutine twin of ``RedisSession``'s."""

    __slots__ = ("_db",)

    def __init__(
        self, db: AsyncRedisDatabase, session_id: str, user_id: object, tenant: object
    ) -> None:
        super().__init__(session_id, user_id, tenant)
        self._db = db

    async def get_items(self, limit: int | None = None) -> list[Message]:
        """The messages oldest first; with ``limit``, the newest ``limit`` of them."""
        return await self._db._run(self._get_items(limit))

    async def add_items(self, items: Sequence[Message]) -> None:
        """Append messages, all or nothing."""
        await self._db._run(self._append(items, None, None, None, None))

    async def pop_item(self) -> Message | None:
        """Remove and return the newest message (None when the log is empty)."""
        return await self._db._run(self._pop_item())

    async def clear_session(self) -> None:
        """Remove every message and the derived state (the session itself stays)."""
        await self._db._run(self._clear_session())

    async def truncate(self, keep: int) -> None:
        """Keep only the oldest ``keep`` messages, atomically."""
        await self._db._run(self._truncate(keep))

    async def append(
        self,
        messages: Sequence[Message],
        *,
        expected_seq: int | None = None,
        state: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        counts: Counts | None = None,
    ) -> int:
        """Append ``messages`` (and ``state`` and ``counts``) in one script."""
        op = self._append(messages, expected_seq, state, expected_version, counts)
        return await self._db._run(op)

    async def page(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[Message], str | None]:
        """A page of messages and the next cursor (see ``RedisSession.page``)."""
        entries, next_cursor = await self._db._run(self._entries(cursor, limit, newest_first))
        return [e.message for e in entries], next_cursor

    async def entries(
        self, cursor: str | None = None, limit: int = 100, newest_first: bool = False
    ) -> tuple[list[LogEntry], str | None]:
        """``page`` with each message's seq and token counts."""
        return await self._db._run(self._entries(cursor, limit, newest_first))

    async def last_seq(self) -> int:
        """The newest live message's seq (0 when empty)."""
        return await self._db._run(self._last_seq())

    async def load_state(self) -> tuple[dict[str, Any] | None, int]:
        """The derived state (None if never saved) and its version."""
        return await self._db._run(self._load_state())

    async def save_state(self, state: Mapping[str, Any] | None, *, expected_version: int) -> int:
        """Replace the derived state if its version is ``expected_version``."""
        return await self._db._run(self._save_state(state, expected_version))

    async def set_counts(self, counts: Counts) -> None:
        """Store token counts: ``{message_id: {tokenizer_name: n}}`` (merged)."""
        await self._db._run(self._set_counts(counts))

    async def get_counts(
        self, message_ids: Sequence[str] | None = None
    ) -> dict[str, dict[str, int]]:
        """Stored token counts of these messages (every message when None)."""
        return await self._db._run(self._get_counts(message_ids))

    async def info(self) -> SessionInfo | None:
        """The session's record, or None if it does not exist (or expired)."""
        return await self._db._run(self._info())

    async def set_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Replace the session's metadata (a JSON object)."""
        await self._db._run(self._set_metadata(metadata))

    def __repr__(self) -> str:
        return f"<AsyncRedisSession {self.session_id!r} of {self._db.url}>"
