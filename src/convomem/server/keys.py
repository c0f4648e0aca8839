"""API keys: made once, shown once, stored hashed, each bound to one tenant.

A key reads ``cm_<key_id>_<secret>``: ``key_id`` (12 hex digits) names the stored record,
``secret`` is 32 random bytes (URL-safe base64). Only the SHA-256 of the whole key is
stored, beside its tenant, an optional name, its creation time and, once revoked, the
revocation time; a key is checked by one lookup of its id and a constant-time compare of
the hash. The records live in the store database itself, so every replica over the same
store sees the same keys: a table ``convomem_api_keys`` in SQLite and PostgreSQL, a hash
``<prefix>:apikeys`` in Redis (one field per key id, the record as JSON).

``KeyStore`` works over an ``AsyncStoreDatabase`` (``aopen_store``) and runs its
statements through the store's own driver, so retries and error mapping come with it
(the way ``recall`` keeps its tables beside the sessions).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass
from typing import Any, Final

from ..errors import ConfigError
from ..stores.database import AsyncStoreDatabase

__all__ = ["KeyRecord", "KeyStore", "NewKey", "check_tenant", "hash_key"]

_KEY: Final = re.compile(r"cm_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
_TENANT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")


def check_tenant(tenant: object) -> str:
    """A tenant name: 1-128 letters, digits and ``. _ : @ -`` (not starting with a sign)."""
    if not isinstance(tenant, str) or not _TENANT.fullmatch(tenant):
        raise ConfigError(
            f"tenant={tenant!r}: must be 1-128 letters, digits or . _ : @ - "
            "(starting with a letter or digit)"
        )
    return tenant


def hash_key(key: str) -> str:
    """The stored form of a key: its SHA-256, hex."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A stored key, without its secret."""

    key_id: str
    tenant: str
    name: str | None
    created_at: float
    revoked_at: float | None
    hash: str

    def public(self) -> dict[str, Any]:
        """The record as shown to people (the hash left out)."""
        out = asdict(self)
        del out["hash"]
        return out


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key just made: ``key`` is shown once and never stored."""

    key: str
    record: KeyRecord


_COLUMNS: Final = "key_id, tenant, name, created_at, revoked_at, hash"


def _row(row: Any) -> KeyRecord:
    key_id, tenant, name, created, revoked, digest = row
    return KeyRecord(
        str(key_id),
        str(tenant),
        name,
        float(created),
        None if revoked is None else float(revoked),
        str(digest),
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _from_json(raw: Any) -> KeyRecord:
    d = json.loads(_text(raw))
    return KeyRecord(
        d["key_id"], d["tenant"], d["name"], d["created_at"], d["revoked_at"], d["hash"]
    )


class KeyStore:
    """The API keys of one store database (see the module docstring)."""

    def __init__(self, db: AsyncStoreDatabase, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self._clock = clock
        module = type(db).__module__
        if module.endswith("sqlite_async"):
            self._kind = "sqlite"
        elif module.endswith("postgres_async"):
            self._kind = "postgresql"
        elif module.endswith("redis_async"):
            self._kind = "redis"
        else:
            raise ConfigError(f"db={db!r}: API keys need a SQLite, PostgreSQL or Redis store")
        self._ready = False

    # -- the public calls ------------------------------------------------------------

    async def create(self, tenant: str, *, name: str | None = None) -> NewKey:
        """A new key of ``tenant`` (stored hashed)."""
        check_tenant(tenant)
        if name is not None and (not isinstance(name, str) or len(name) > 200):
            raise ConfigError(f"name={name!r}: must be a string of at most 200 characters")
        key_id = secrets.token_hex(6)
        key = f"cm_{key_id}_{secrets.token_urlsafe(32)}"
        record = KeyRecord(key_id, tenant, name, self._clock(), None, hash_key(key))
        await self._put(record)
        return NewKey(key, record)

    async def verify(self, key: str) -> KeyRecord | None:
        """The live record of ``key``, or None (malformed, unknown, revoked, wrong)."""
        m = _KEY.fullmatch(key)
        if m is None:
            return None
        record = await self.get(m.group(1))
        if record is None or record.revoked_at is not None:
            return None
        if not hmac.compare_digest(record.hash, hash_key(key)):
            return None
        return record

    async def get(self, key_id: str) -> KeyRecord | None:
        """The record ``key_id`` names, revoked or not."""
        await self._migrate()
        if self._kind == "redis":
            raw = await self._redis(lambda k: (yield _cmd("HGET", k, key_id)))
            return None if raw is None else _from_json(raw)
        row = await self._sql(
            lambda t: f"SELECT {_COLUMNS} FROM {t} WHERE key_id = %s", (key_id,), "one"
        )
        return None if row is None else _row(row)

    async def list(self, tenant: str | None = None) -> list[KeyRecord]:
        """Every key (of ``tenant`` when given), oldest first."""
        await self._migrate()
        if self._kind == "redis":
            raw = await self._redis(lambda k: (yield _cmd("HVALS", k)))
            records = [_from_json(v) for v in raw or []]
        else:
            rows = await self._sql(lambda t: f"SELECT {_COLUMNS} FROM {t}", (), "all")
            records = [_row(r) for r in rows]
        records = [r for r in records if tenant is None or r.tenant == tenant]
        return sorted(records, key=lambda r: (r.created_at, r.key_id))

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key (it stops working at once); whether it was live."""
        record = await self.get(key_id)
        if record is None or record.revoked_at is not None:
            return False
        revoked = KeyRecord(
            record.key_id, record.tenant, record.name, record.created_at, self._clock(), record.hash
        )
        await self._put(revoked)
        return True

    # -- the backends -----------------------------------------------------------------

    async def _put(self, r: KeyRecord) -> None:
        await self._migrate()
        if self._kind == "redis":
            text = json.dumps(asdict(r), separators=(",", ":"))
            await self._redis(lambda k: (yield _cmd("HSET", k, r.key_id, text)))
            return
        values = (r.key_id, r.tenant, r.name, r.created_at, r.revoked_at, r.hash)
        await self._sql(
            lambda t: f"DELETE FROM {t} WHERE key_id = %s",
            (r.key_id,),
            "run",
            write=True,
            then=(
                lambda t: f"INSERT INTO {t} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)",
                values,
            ),
        )

    async def _migrate(self) -> None:
        if self._ready or self._kind == "redis":
            return
        ddl = (
            "CREATE TABLE IF NOT EXISTS {t} (key_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
            "name TEXT, created_at DOUBLE PRECISION NOT NULL, "
            "revoked_at DOUBLE PRECISION, hash TEXT NOT NULL)"
        )
        await self._sql(lambda t: ddl.format(t=t), (), "run", write=True, lock=True)
        self._ready = True

    async def _sql(
        self,
        sql: Callable[[str], str],
        params: tuple[Any, ...],
        fetch: str,
        *,
        write: bool = False,
        then: tuple[Callable[[str], str], tuple[Any, ...]] | None = None,
        lock: bool = False,
    ) -> Any:
        """One statement (and an optional second in the same transaction)."""
        db: Any = self.db
        steps = [(sql, params, fetch)] + ([] if then is None else [(then[0], then[1], "run")])
        if self._kind == "sqlite":
            from ..stores._sqlite_calls import Call

            def fn(tx: Any) -> Any:
                out: Any = None
                for i, (make, args, how) in enumerate(steps):
                    text = make("convomem_api_keys").replace("%s", "?")
                    got = getattr(tx.conn, how)(text, args)
                    if i == 0:
                        out = got
                return out

            return await db._arun(Call(fn, write))
        from ..stores._pg_calls import Call as PgCall
        from ..stores._pg_ops import Q, in_tx

        def body(tx: Any) -> Generator[Any, Any, Any]:
            out: Any = None
            if lock:  # replicas starting at once must not race on CREATE TABLE
                yield Q.run("SELECT pg_advisory_xact_lock(hashtext('convomem_api_keys'))")
            for i, (make, args, how) in enumerate(steps):
                got = yield Q(make(f"{tx.schema}.convomem_api_keys"), args, how)  # type: ignore[arg-type]
                if i == 0:
                    out = got
            return out

        return await db._arun(PgCall(lambda tx: in_tx(tx, body(tx)) if write else body(tx)))

    async def _redis(self, op: Callable[[str], Generator[Any, Any, Any]]) -> Any:
        db: Any = self.db
        return await db._arun(lambda ctx: op(f"{ctx.prefix}:apikeys"))


def _cmd(*args: Any) -> Any:
    from ..stores._redis_ops import Command

    return Command(args)
