"""``/v1/recall/search`` and ``DELETE /v1/users/{id}``: what the service knows about a
user of the key's tenant (the facts are ``routes_facts``'s).

A user exists in a tenant while they own a session there; a user of another tenant (the
same id included) or of none gets the same 404, so a key cannot learn whether a user
exists elsewhere. The work is ``operations``'s (the MCP tools call the same).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from . import operations
from .deps import ApiKey, Services, get_services, require_key
from .models import Body, Erased, HitOut, Id

router = APIRouter(tags=["users"])

Key = Annotated[ApiKey, Depends(require_key)]
Svc = Annotated[Services, Depends(get_services)]


class SearchRequest(Body):
    user_id: Id
    query: str = Field(min_length=1, max_length=4000)
    k: int = Field(default=10, ge=1, le=100)
    kinds: list[str] | None = Field(default=None, description="message, summary, fact...")


class SearchResponse(BaseModel):
    hits: list[HitOut]


@router.post("/v1/recall/search", response_model=SearchResponse)
async def search(body: SearchRequest, key: Key, svc: Svc) -> SearchResponse:
    """The ``k`` items of the user's past sessions most relevant to ``query`` (hybrid
    lexical + vector search, fused by reciprocal rank)."""
    hits = await operations.search(svc, key, body.user_id, body.query, k=body.k, kinds=body.kinds)
    return SearchResponse(hits=hits)


@router.delete("/v1/users/{user_id}", response_model=Erased)
async def erase_user(user_id: str, key: Key, svc: Svc) -> Erased:
    """Erase everything of the user in the tenant: sessions (logs, summaries, state),
    recall items and vectors, facts, idempotency records."""
    return await operations.erase_user(svc, key, user_id)
