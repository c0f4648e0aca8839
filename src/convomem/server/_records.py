"""Small JSON records of the service kept in the store database itself: API keys and
idempotency records, so every replica over the same store shares them.

``Records(db, name)`` is a table ``convomem_<name>`` (``id`` primary key, ``body`` JSON
text, ``created_at``) in SQLite and PostgreSQL (in the store's schema), run through the
store's statement hook (``run_statements``: its retries, error mapping and work counts,
as ``recall`` does); in Redis a hash ``<prefix>:<name>``.

With ``ttl`` a record is gone ``ttl`` seconds after it was written: the SQL tables drop
older records as new ones are added (and never return one); in Redis the records whose
ids share their part before the first ``/`` are one hash (``<prefix>:<name>:<part>``,
each field the rest of the id, its value the time and the body) that Redis expires
``ttl`` after its newest record. ``drop(prefix)`` deletes every record whose id starts
with ``prefix`` (ids of the form ``a/b/c``: ``drop("a/")`` or ``drop("a/b/")``), so a
caller that puts what the records belong to in their ids can erase them all at once.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Final

from .. import _io
from ..errors import ConfigError
from ..stores.database import AsyncStoreDatabase
from ..stores.statements import Command, Eval, Q, script

__all__ = ["Records"]

_INSERT = "INSERT INTO {t} (id, body, created_at) VALUES (%s, %s, %s)"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_SET_TTL: Final = script(
    "records_set_ttl",
    """
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and ARGV[6] == '1' then
  local at = tonumber(string.match(v, '^(%S+)'))
  if at and at >= tonumber(ARGV[3]) - tonumber(ARGV[4]) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3] .. ' ' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
""",
    writes=True,
)
"""One record of a group with a TTL, in one step: written (with its time) unless a
record younger than the TTL holds the id (``only_new``), the group's expiry renewed."""


def _split(rid: str) -> tuple[str, str]:
    """A Redis record id's group (before the first ``/``) and the rest."""
    group, _, rest = rid.partition("/")
    return group, rest


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class Records:
    """The records ``name`` of one store database (see the module docstring)."""

    def __init__(self, db: object, name: str, *, ttl: float | None = None) -> None:
        if not isinstance(db, AsyncStoreDatabase) or not _io.is_async_callable(db.run_statements):
            raise ConfigError(f"db={db!r}: the service needs a store from aopen_store")
        self.db = db
        self.kind = db.kind
        self.name = name
        self.ttl = ttl
        self._ready = False
        table = f"convomem_{name}"
        self._index = f"{table}_created"
        self._table = f"{db.schema}.{table}" if self.kind == "postgresql" else table
        self._key = f"{db.prefix}:{name}"  # (Redis)

    async def get(self, rid: str, now: float | None = None) -> str | None:
        """The body of record ``rid`` (None: none, or, with ``ttl``, older than it at
        ``now``)."""
        if self.kind == "redis":
            if self.ttl is None:
                raw = await self._redis(lambda k: (yield Command(("HGET", k, rid))))
                return None if raw is None else _text(raw)
            group, rest = _split(rid)
            raw = await self._redis(lambda k: (yield Command(("HGET", f"{k}:{group}", rest))))
            if raw is None:
                return None
            at, _, body = _text(raw).partition(" ")
            return None if self._stale(float(at), now) else body
        row = await self._sql([Q.one("SELECT body, created_at FROM {t} WHERE id = %s", (rid,))])
        return None if row is None or self._stale(float(row[1]), now) else str(row[0])

    def _stale(self, created_at: float, now: float | None) -> bool:
        return self.ttl is not None and now is not None and created_at < now - self.ttl

    async def put(self, rid: str, body: str, now: float) -> None:
        """Write record ``rid`` (replacing it)."""
        if self.kind == "redis":
            await self._redis(lambda k: self._set(k, rid, body, now, only_new=False))
            return
        delete = Q.run("DELETE FROM {t} WHERE id = %s", (rid,))
        await self._sql([delete, Q.run(_INSERT, (rid, body, now))], write=True)

    async def add(self, rid: str, body: str, now: float) -> bool:
        """Write record ``rid`` unless it exists; whether it was written."""
        if self.kind == "redis":
            done = await self._redis(lambda k: self._set(k, rid, body, now, only_new=True))
            return bool(done)
        steps: list[Q] = []
        if self.ttl is not None:
            steps.append(Q.run("DELETE FROM {t} WHERE created_at < %s", (now - self.ttl,)))
        steps.append(Q.run(_INSERT + " ON CONFLICT (id) DO NOTHING", (rid, body, now)))
        n = await self._sql(steps, write=True, result=-1)
        return bool(n)

    async def delete(self, rid: str) -> bool:
        """Delete record ``rid``; whether it was there."""
        if self.kind == "redis":
            if self.ttl is None:
                n = await self._redis(lambda k: (yield Command(("HDEL", k, rid))))
            else:
                group, rest = _split(rid)
                n = await self._redis(lambda k: (yield Command(("HDEL", f"{k}:{group}", rest))))
            return bool(n)
        n = await self._sql([Q.run("DELETE FROM {t} WHERE id = %s", (rid,))], write=True)
        return bool(n)

    async def drop(self, prefix: str) -> int:
        """Delete every record whose id starts with ``prefix`` (which ends with ``/``);
        how many (in Redis, a whole group counts as one)."""
        if not prefix.endswith("/") or prefix == "/":
            raise ConfigError(f"prefix={prefix!r}: must be a non-empty id part ending with /")
        if self.kind == "sqlite":  # a range of the primary key (SQLite compares bytes)
            end = prefix[:-1] + "0"  # "0" follows "/": every id with the prefix is below
            sql = "DELETE FROM {t} WHERE id >= %s AND id < %s"
            return int(await self._sql([Q.run(sql, (prefix, end))], write=True))
        if self.kind == "postgresql":  # (a collation may order "/" anywhere: no range)
            sql = "DELETE FROM {t} WHERE starts_with(id, %s)"
            return int(await self._sql([Q.run(sql, (prefix,))], write=True))
        group, field_prefix = ("", prefix) if self.ttl is None else _split(prefix)
        if not field_prefix:
            return int(await self._redis(lambda k: (yield Command(("DEL", f"{k}:{group}")))))
        pattern = _glob_escape(field_prefix) + "*"

        def op(k: str) -> Generator[Any, Any, int]:
            hkey, cursor, n = (f"{k}:{group}" if group else k), "0", 0
            while True:
                reply = yield Command(("HSCAN", hkey, cursor, "MATCH", pattern, "COUNT", 500))
                cursor, found = _text(reply[0]), reply[1]  # (redis-py gives a dict)
                fields = list(found) if isinstance(found, dict) else list(found)[0::2]
                if fields:
                    n += int((yield Command(("HDEL", hkey, *fields))))
                if cursor == "0":
                    return n

        return int(await self._redis(op))

    async def values(self) -> list[str]:
        """Every record's body (hash-mode Redis and SQL only)."""
        if self.kind == "redis":
            if self.ttl is not None:
                raise ConfigError("values(): not kept for records with a ttl in Redis")
            raw = await self._redis(lambda k: (yield Command(("HVALS", k))))
            return [_text(v) for v in raw or []]
        rows = await self._sql([Q.all("SELECT body FROM {t}")])
        return [str(r[0]) for r in rows]

    # -- the backends -----------------------------------------------------------------

    def _set(
        self, key: str, rid: str, body: str, now: float, *, only_new: bool
    ) -> Generator[Any, Any, Any]:
        if self.ttl is None:
            return (yield Command(("HSETNX" if only_new else "HSET", key, rid, body)))
        group, rest = _split(rid)
        ms = max(1, int(self.ttl * 1000))
        args = (rest, body, repr(now), repr(self.ttl), ms, "1" if only_new else "0")
        return (yield Eval(_SET_TTL, (f"{key}:{group}",), args))

    async def _redis(self, op: Callable[[str], Generator[Any, Any, Any]]) -> Any:
        key = self._key
        return await self.db.run_statements(lambda: op(key))

    async def _migrate(self) -> None:
        if self._ready:
            return
        ddl = (
            "CREATE TABLE IF NOT EXISTS {t} (id TEXT PRIMARY KEY, body TEXT NOT NULL, "
            "created_at DOUBLE PRECISION NOT NULL)"
        )
        index = "CREATE INDEX IF NOT EXISTS {i} ON {t} (created_at)"
        self._ready = True  # (set first: the migration itself goes through _sql)
        try:
            await self._sql([Q.run(ddl), Q.run(index)], write=True, lock=True)
        except BaseException:
            self._ready = False
            raise

    async def _sql(
        self, steps: list[Q], *, write: bool = False, lock: bool = False, result: int = 0
    ) -> Any:
        """Statements in one transaction (``{t}`` is the table, ``{i}`` its index,
        ``%s`` a placeholder); the ``result``-th's answer (a row, rows, or a row count)."""
        await self._migrate()
        sqlite = self.kind == "sqlite"
        spelled = [
            q._replace(
                sql=q.sql.replace("{i}", self._index)
                .replace("{t}", self._table)
                .replace("%s", "?" if sqlite else "%s")
            )
            for q in steps
        ]
        table = self._table

        def op() -> Generator[Q, Any, Any]:
            if lock and not sqlite:  # replicas starting at once must not race on CREATE
                yield Q.run("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
            out = []
            for q in spelled:
                out.append((yield q))
            return out[result]

        return await self.db.run_statements(op, write=write)
