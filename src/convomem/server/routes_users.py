"""``/v1/recall/search``, ``/v1/users/{id}/facts`` and ``DELETE /v1/users/{id}``: what the
service knows about a user of the key's tenant.

A user exists in a tenant while they own a session there; a user of another tenant (the
same id included) or of none gets the same 404, so a key cannot learn whether a user
exists elsewhere.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, Field

from .deps import ApiKey, Services, get_services, require_key
from .models import Body, Id
from .problems import Problem, not_found

router = APIRouter(tags=["users"])

Key = Annotated[ApiKey, Depends(require_key)]
Svc = Annotated[Services, Depends(get_services)]


class SearchRequest(Body):
    user_id: Id
    query: str = Field(min_length=1, max_length=4000)
    k: int = Field(default=10, ge=1, le=100)
    kinds: list[str] | None = Field(default=None, description="message, summary, fact...")


class HitOut(BaseModel):
    message_id: str
    session_id: str
    score: float
    text: str
    kind: str
    seq: int | None
    created_at: float
    lexical: float | None
    similarity: float | None


class SearchResponse(BaseModel):
    hits: list[HitOut]


class FactOut(BaseModel):
    subject: str
    attribute: str
    value: str
    statement: str
    source_role: str | None
    session_id: str | None
    message_id: str | None
    seq: int | None
    valid_from: float | None
    valid_to: float | None


class FactsResponse(BaseModel):
    user_id: str
    current: list[FactOut]
    history: list[FactOut] = Field(description="every value, superseded ones included")


class Erased(BaseModel):
    user_id: str
    sessions: int
    items: int


async def require_user(svc: Services, key: ApiKey, user_id: str) -> None:
    """The one 404 of a user who owns no session in the key's tenant."""
    found, _ = await svc.db.sessions(user_id=user_id, tenant=key.tenant, limit=1)
    if not found:
        raise not_found("user", user_id)


def _recall(svc: Services) -> Any:
    if svc.recall is None:
        raise Problem(
            400,
            "recall-off",
            "recall is off: start the service with --recall URL or over a SQLite or "
            "PostgreSQL store (with the numpy extra)",
        )
    return svc.recall


@router.post("/v1/recall/search", response_model=SearchResponse)
async def search(body: SearchRequest, key: Key, svc: Svc) -> SearchResponse:
    """The ``k`` items of the user's past sessions most relevant to ``query`` (hybrid
    lexical + vector search, fused by reciprocal rank)."""
    await require_user(svc, key, body.user_id)
    hits = await _recall(svc).search(
        body.query, user_id=body.user_id, k=body.k, tenant=key.tenant, kinds=body.kinds
    )
    svc.metrics.add("recall_hits", len(hits))
    return SearchResponse(hits=[HitOut(**asdict(h)) for h in hits])


def _fact(f: Any) -> FactOut:
    return FactOut(
        subject=f.subject,
        attribute=f.attribute,
        value=f.value,
        statement=f.statement(),
        source_role=f.source_role,
        session_id=f.session_id,
        message_id=f.message_id,
        seq=f.seq,
        valid_from=f.valid_from,
        valid_to=f.valid_to,
    )


@router.get("/v1/users/{user_id}/facts", response_model=FactsResponse)
async def facts(user_id: str, key: Key, svc: Svc) -> FactsResponse:
    """The user's long-term facts: the current value of each, and every value with its
    valid time (a newer statement closes the older one)."""
    await require_user(svc, key, user_id)
    recall = _recall(svc)
    if not hasattr(recall, "facts"):
        raise Problem(400, "recall-off", "this version's recall index keeps no facts")
    history = await recall.facts(user_id, tenant=key.tenant)
    current = history.current(None)
    subjects = sorted({f.subject for f in current} | {"user"})
    every = [f for s in subjects for f in history.history(None, subject=s)]
    return FactsResponse(
        user_id=user_id,
        current=[_fact(f) for f in current],
        history=[_fact(f) for f in every],
    )


@router.delete("/v1/users/{user_id}", response_model=Erased)
async def erase_user(user_id: str, key: Key, svc: Svc, response: Response) -> Erased:
    """Erase everything of the user in the tenant: sessions (logs, summaries, state),
    recall items and vectors, facts, idempotency records."""
    await require_user(svc, key, user_id)
    if svc.idempotency is not None:
        await svc.idempotency.forget(key.tenant, user_id)
    items = 0
    if svc.recall is not None:
        items = await svc.recall.erase_user(user_id, tenant=key.tenant)
    if svc.memories is not None:
        svc.memories.evict(key.tenant, user_id=user_id)
    sessions = await svc.db.erase_user(user_id, tenant=key.tenant)
    return Erased(user_id=user_id, sessions=sessions, items=items)
