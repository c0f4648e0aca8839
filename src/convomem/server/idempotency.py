"""``Idempotency-Key``: a retried append gets the first answer back, a reused key with
another body a 422, and two requests racing with one key never write twice.

Each (tenant, session, key) keeps a record for ``ttl`` (a day by default) in the store
database (``_records``): the SHA-256 of the request body, and the answer once given. The
key is *bound* to the body before anything is written (``claim``: an insert that only
one request can win), so:

- a request whose key is bound to another body is an ``idempotency-conflict`` (422),
  even while the first request is still writing;
- a retry of the same body is answered from the record once it has its answer; while
  the first copy is still writing (or died), the retry appends itself, which writes
  nothing twice: the messages of a keyed request that came without ids get ids made
  from the key, and appends are idempotent by message id, all or nothing;
- a request refused before it wrote anything (a 409 on ``If-Match``, a bad message)
  unbinds its key (``release``), so the corrected request may use it.

A record's id names the session's owner, the session, the session's creation time and
the key, all hashed: ``forget(tenant, user_id[, session_id])`` deletes the records of a
user or of one session (an erasure or a delete leaves none), and a session deleted and
created again under the same id never replays the old one's answers.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..stores.database import AsyncStoreDatabase, SessionInfo
from ._records import Records

__all__ = ["DAY", "Earlier", "Idempotency", "body_digest"]

DAY = 86400.0
_CLAIMS = 8  # attempts to bind a key whose record vanishes between two looks


def body_digest(session_id: str, body: Any) -> str:
    """The SHA-256 of a request: its session and its body as canonical JSON."""
    text = json.dumps([session_id, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _h(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Earlier:
    """The record of a key bound by an earlier request: its body's digest, and its
    answer (None while that request has not answered, or if it died)."""

    digest: str
    answer: dict[str, Any] | None


class Idempotency:
    """The idempotency records of one store database (see the module docstring)."""

    def __init__(
        self, db: AsyncStoreDatabase, *, ttl: float = DAY, clock: Callable[[], float] = time.time
    ) -> None:
        self._records = Records(db, "idempotency", ttl=ttl)
        self._clock = clock

    @staticmethod
    def _prefix(tenant: str | None, user_id: str | None, session_id: str | None = None) -> str:
        scope = "\1" if tenant is None else tenant  # no tenant name holds a control character
        user = _h(scope, user_id or "") + "/"
        return user if session_id is None else user + _h(scope, session_id) + "/"

    def _rid(self, tenant: str | None, info: SessionInfo, key: str) -> str:
        prefix = self._prefix(tenant, info.user_id, info.session_id)
        return prefix + _h(repr(info.created_at), key)

    async def claim(
        self, tenant: str | None, info: SessionInfo, key: str, digest: str
    ) -> Earlier | None:
        """Bind ``key`` to ``digest``: None when this request bound it, else the record
        of the request that did."""
        rid = self._rid(tenant, info, key)
        text = json.dumps({"digest": digest, "answer": None}, separators=(",", ":"))
        for _ in range(_CLAIMS):
            now = self._clock()
            if await self._records.add(rid, text, now):
                return None
            raw = await self._records.get(rid, now)
            if raw is not None:
                d = json.loads(raw)
                answer = d.get("answer")
                return Earlier(str(d["digest"]), None if answer is None else dict(answer))
            # released (or expired) between the two looks: try to bind it again
        return Earlier(digest, None)  # still racing: proceed as a retry (it writes nothing twice)

    async def complete(
        self, tenant: str | None, info: SessionInfo, key: str, digest: str, answer: dict[str, Any]
    ) -> None:
        """Keep the answer of the request that holds ``key``."""
        text = json.dumps({"digest": digest, "answer": answer}, separators=(",", ":"))
        await self._records.put(self._rid(tenant, info, key), text, self._clock())

    async def release(self, tenant: str | None, info: SessionInfo, key: str) -> None:
        """Unbind ``key`` (its request wrote nothing)."""
        await self._records.delete(self._rid(tenant, info, key))

    async def forget(
        self, tenant: str | None, user_id: str | None, session_id: str | None = None
    ) -> int:
        """Delete the records of a user's sessions (of one of them, with
        ``session_id``): before an erasure or a delete."""
        return await self._records.drop(self._prefix(tenant, user_id, session_id))
