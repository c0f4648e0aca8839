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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Final

from ..errors import ConfigError
from ..stores.database import AsyncStoreDatabase
from ..stores.records import check_id
from ._records import Records

__all__ = ["KeyRecord", "KeyStore", "NewKey", "check_tenant", "hash_key"]

_KEY: Final = re.compile(r"cm_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")


def check_tenant(tenant: object) -> str:
    """A tenant name: the service's one id rule (``stores.records.ID_RULE``), as for
    session and user ids."""
    return check_id("tenant", tenant)


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


def _from_json(raw: str) -> KeyRecord:
    d = json.loads(raw)
    return KeyRecord(
        d["key_id"], d["tenant"], d["name"], d["created_at"], d["revoked_at"], d["hash"]
    )


class KeyStore:
    """The API keys of one store database (see the module docstring)."""

    def __init__(self, db: AsyncStoreDatabase, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self._clock = clock
        self._records = Records(db, "api_keys")

    async def create(self, tenant: str, *, name: str | None = None) -> NewKey:
        """A new key of ``tenant`` (stored hashed)."""
        check_tenant(tenant)
        if name is not None and (not isinstance(name, str) or len(name) > 200):
            raise ConfigError(f"name={name!r}: must be a string of at most 200 characters")
        key_id = secrets.token_hex(6)
        key = f"cm_{key_id}_{secrets.token_urlsafe(32)}"
        record = KeyRecord(key_id, tenant, name, self._clock(), None, hash_key(key))
        if not await self._records.add(key_id, _dumps(record), record.created_at):
            raise ConfigError(f"key_id={key_id!r}: taken (48 random bits met); try again")
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
        raw = await self._records.get(key_id)
        return None if raw is None else _from_json(raw)

    async def list(self, tenant: str | None = None) -> list[KeyRecord]:
        """Every key (of ``tenant`` when given), oldest first."""
        records = [_from_json(v) for v in await self._records.values()]
        records = [r for r in records if tenant is None or r.tenant == tenant]
        return sorted(records, key=lambda r: (r.created_at, r.key_id))

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key (it stops working at once); whether it was live."""
        record = await self.get(key_id)
        if record is None or record.revoked_at is not None:
            return False
        now = self._clock()
        revoked = KeyRecord(
            record.key_id, record.tenant, record.name, record.created_at, now, record.hash
        )
        await self._records.put(key_id, _dumps(revoked), record.created_at)
        return True


def _dumps(record: KeyRecord) -> str:
    return json.dumps(asdict(record), separators=(",", ":"))
