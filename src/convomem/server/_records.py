"""Small JSON records of the service kept in the store database itself: API keys and
idempotency records, so every replica over the same store shares them.

``Records(db, name)`` is a table ``convomem_<name>`` (``id`` primary key, ``body`` JSON
text, ``created_at``) in SQLite and PostgreSQL, run through the store's own driver (its
retries and error mapping, as ``recall`` does); in Redis a hash ``<prefix>:<name>``, or,
with ``ttl``, one string key per record (``<prefix>:<name>:<id>``) that Redis expires.
With ``ttl`` the SQL tables drop records older than it as new ones are added.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from ..errors import ConfigError
from ..stores.database import AsyncStoreDatabase

__all__ = ["Records", "store_kind"]

_INSERT = "INSERT INTO {t} (id, body, created_at) VALUES (%s, %s, %s)"


def store_kind(db: object) -> str:
    """``"sqlite"``, ``"postgresql"`` or ``"redis"``: the backend of an async database."""
    module = type(db).__module__
    for suffix, kind in (
        ("sqlite_async", "sqlite"),
        ("postgres_async", "postgresql"),
        ("redis_async", "redis"),
    ):
        if module.endswith(suffix):
            return kind
    raise ConfigError(f"db={db!r}: the service needs a SQLite, PostgreSQL or Redis store")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cmd(*args: Any) -> Any:
    from ..stores._redis_ops import Command

    return Command(args)


class Records:
    """The records ``name`` of one store database (see the module docstring)."""

    def __init__(self, db: AsyncStoreDatabase, name: str, *, ttl: float | None = None) -> None:
        self.db = db
        self.kind = store_kind(db)
        self.name = name
        self.ttl = ttl
        self._ready = False

    async def get(self, rid: str) -> str | None:
        """The body of record ``rid`` (None: none)."""
        if self.kind == "redis":
            if self.ttl is None:
                raw = await self._redis(lambda k: (yield _cmd("HGET", k, rid)))
            else:
                raw = await self._redis(lambda k: (yield _cmd("GET", f"{k}:{rid}")))
            return None if raw is None else _text(raw)
        row = await self._sql([("SELECT body FROM {t} WHERE id = %s", (rid,), "one")])
        return None if row is None else str(row[0])

    async def put(self, rid: str, body: str, now: float) -> None:
        """Write record ``rid`` (replacing it)."""
        if self.kind == "redis":
            await self._redis(lambda k: (yield self._set(k, rid, body, only_new=False)))
            return
        await self._sql(
            [
                ("DELETE FROM {t} WHERE id = %s", (rid,), "run"),
                (
                    "INSERT INTO {t} (id, body, created_at) VALUES (%s, %s, %s)",
                    (rid, body, now),
                    "run",
                ),
            ],
            write=True,
        )

    async def add(self, rid: str, body: str, now: float) -> bool:
        """Write record ``rid`` unless it exists; whether it was written."""
        if self.kind == "redis":
            done = await self._redis(lambda k: (yield self._set(k, rid, body, only_new=True)))
            return bool(done)
        steps: list[tuple[str, tuple[Any, ...], str]] = []
        if self.ttl is not None:
            steps.append(("DELETE FROM {t} WHERE created_at < %s", (now - self.ttl,), "run"))
        steps.append(
            (
                _INSERT + " ON CONFLICT (id) DO NOTHING",
                (rid, body, now),
                "run",
            )
        )
        n = await self._sql(steps, write=True, result=-1)
        return bool(n)

    async def values(self) -> list[str]:
        """Every record's body (hash-mode Redis and SQL only)."""
        if self.kind == "redis":
            if self.ttl is not None:
                raise ConfigError("values(): not kept for records with a ttl in Redis")
            raw = await self._redis(lambda k: (yield _cmd("HVALS", k)))
            return [_text(v) for v in raw or []]
        rows = await self._sql([("SELECT body FROM {t}", (), "all")])
        return [str(r[0]) for r in rows]

    # -- the backends -----------------------------------------------------------------

    def _set(self, key: str, rid: str, body: str, *, only_new: bool) -> Any:
        if self.ttl is None:
            return _cmd("HSETNX" if only_new else "HSET", key, rid, body)
        args: tuple[Any, ...] = ("SET", f"{key}:{rid}", body, "PX", max(1, int(self.ttl * 1000)))
        return _cmd(*args, "NX") if only_new else _cmd(*args)

    async def _redis(self, op: Callable[[str], Generator[Any, Any, Any]]) -> Any:
        db: Any = self.db
        return await db._arun(lambda ctx: op(f"{ctx.prefix}:{self.name}"))

    async def _migrate(self) -> None:
        if self._ready:
            return
        ddl = (
            "CREATE TABLE IF NOT EXISTS {t} (id TEXT PRIMARY KEY, body TEXT NOT NULL, "
            "created_at DOUBLE PRECISION NOT NULL)"
        )
        index = "CREATE INDEX IF NOT EXISTS {t}_created ON {t} (created_at)"
        self._ready = True  # (set first: the migration itself goes through _sql)
        try:
            await self._sql([(ddl, (), "run"), (index, (), "run")], write=True, lock=True)
        except BaseException:
            self._ready = False
            raise

    async def _sql(
        self,
        steps: list[tuple[str, tuple[Any, ...], str]],
        *,
        write: bool = False,
        lock: bool = False,
        result: int = 0,
    ) -> Any:
        """Statements in one transaction (``{t}`` is the table); the ``result``-th's
        answer (a row, rows, or a row count)."""
        await self._migrate()
        db: Any = self.db
        table = f"convomem_{self.name}"
        if self.kind == "sqlite":
            from ..stores._sqlite_calls import Call

            def fn(tx: Any) -> Any:
                out = []
                for sql, args, how in steps:
                    text = sql.replace("{t}", table).replace("%s", "?")
                    got = getattr(tx.conn, how)(text, args)
                    out.append(got.rowcount if how == "run" else got)
                return out[result]

            return await db._arun(Call(fn, write))
        from ..stores._pg_calls import Call as PgCall
        from ..stores._pg_ops import Q, in_tx

        def body(tx: Any) -> Generator[Any, Any, Any]:
            out = []
            if lock:  # replicas starting at once must not race on CREATE TABLE
                yield Q.run("SELECT pg_advisory_xact_lock(hashtext(%s))", (table,))
            for sql, args, how in steps:
                qualified = f"{tx.schema}.{table}"
                text = sql.replace("{t}_created", f"{table}_created").replace("{t}", qualified)
                out.append((yield Q(text, args, how)))  # type: ignore[arg-type]
            return out[result]

        return await db._arun(PgCall(lambda tx: in_tx(tx, body(tx)) if write else body(tx)))
