"""``Idempotency-Key``: a retried append gets the first answer back, a reused key with
another body a 409.

Each (tenant, session, key) keeps a record for ``ttl`` (a day by default) in the store
database (``_records``): the SHA-256 of the request body and the answer given. A retry
with the same body is answered from the record (the same ``last_seq`` and ids, nothing
appended); another body under the same key is an ``idempotency-conflict`` problem. Two
copies of one request racing each other are covered as well: the messages of a keyed
request that came without ids get ids made from the key, so the store's own
idempotency by message id makes the second copy append nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from ..stores.database import AsyncStoreDatabase
from ._records import Records

__all__ = ["DAY", "Idempotency", "body_digest"]

DAY = 86400.0


def body_digest(session_id: str, body: Any) -> str:
    """The SHA-256 of a request: its session and its body as canonical JSON."""
    text = json.dumps([session_id, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class Idempotency:
    """The idempotency records of one store database (see the module docstring)."""

    def __init__(self, db: AsyncStoreDatabase, *, ttl: float = DAY) -> None:
        self._records = Records(db, "idempotency", ttl=ttl)

    @staticmethod
    def _rid(tenant: str | None, session_id: str, key: str) -> str:
        scope = "\1" if tenant is None else tenant  # no tenant name holds a control character
        return hashlib.sha256(f"{scope}\0{session_id}\0{key}".encode()).hexdigest()

    async def recall(
        self, tenant: str | None, session_id: str, key: str
    ) -> tuple[str, dict[str, Any]] | None:
        """``(digest, answer)`` of an earlier request with this key, or None."""
        raw = await self._records.get(self._rid(tenant, session_id, key))
        if raw is None:
            return None
        d = json.loads(raw)
        return str(d["digest"]), dict(d["answer"])

    async def remember(
        self,
        tenant: str | None,
        session_id: str,
        key: str,
        digest: str,
        answer: dict[str, Any],
    ) -> None:
        """Keep the answer of a request (the first one kept wins)."""
        text = json.dumps({"digest": digest, "answer": answer}, separators=(",", ":"))
        await self._records.add(self._rid(tenant, session_id, key), text, time.time())
