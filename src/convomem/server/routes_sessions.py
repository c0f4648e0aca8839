"""``/v1/sessions``: create, list (cursor pages), read and delete sessions of the key's
tenant. A session of another tenant, even under the same id, is answered exactly as one
that does not exist."""

from __future__ import annotations

import uuid
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Response

from ..stores.database import SessionInfo
from .deps import (
    TTL_KEY,
    ApiKey,
    Services,
    expired,
    expires_at,
    get_services,
    require_key,
    session_info,
    ttl_of,
)
from .deps import (
    delete_session as remove_session,
)
from .models import SessionCreate, SessionOut, SessionPage
from .problems import Problem, not_found

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])

Key = Annotated[ApiKey, Depends(require_key)]
Svc = Annotated[Services, Depends(get_services)]


def public_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if not k.startswith("convomem:")}


def session_out(info: SessionInfo) -> SessionOut:
    return SessionOut(
        id=info.session_id,
        user_id=info.user_id,
        metadata=public_metadata(info.metadata),
        created_at=info.created_at,
        updated_at=info.updated_at,
        expires_at=expires_at(info),
        ttl_seconds=ttl_of(info),
        message_count=info.message_count,
        last_seq=info.last_seq,
    )


@router.post("", status_code=201, response_model=SessionOut)
async def create_session(body: SessionCreate, key: Key, svc: Svc, response: Response) -> SessionOut:
    """Create a session owned by ``user_id``. Creating it again with the same owner and
    metadata returns it (200); another owner or other metadata is a 409."""
    sid = body.id or uuid.uuid4().hex
    budget = body.metadata.get("budget")
    if budget is not None and (
        not isinstance(budget, int) or isinstance(budget, bool) or budget < 64
    ):
        raise Problem(
            422,
            "bad-request",
            "metadata.budget: an integer >= 64",
            field="metadata.budget",
            value=budget,
        )
    reserved = [k for k in body.metadata if k.startswith("convomem:")]
    if reserved:
        raise Problem(
            422,
            "bad-request",
            "metadata: keys starting convomem: are the service's",
            field=f"metadata.{reserved[0]}",
            value=body.metadata[reserved[0]],
        )
    stored = dict(body.metadata)
    if body.ttl_seconds is not None:
        stored[TTL_KEY] = body.ttl_seconds
    store = svc.db.session(sid, tenant=key.tenant)
    info = await store.info()
    if info is not None and expired(info):
        await remove_session(svc, key, info)
        info = None
    if info is None:
        await svc.db.session(sid, user_id=body.user_id, tenant=key.tenant).set_metadata(stored)
        info = await store.info()
        if info is None:  # expired at once (a zero TTL) or deleted meanwhile
            raise not_found("session", sid)
        response.headers["Location"] = f"/v1/sessions/{quote(sid, safe='')}"
        response.headers["ETag"] = f'"{info.last_seq}"'
        return session_out(info)
    if info.user_id != body.user_id or info.metadata != stored:
        raise Problem(
            409,
            "conflict",
            f"session {sid!r} exists with another owner or metadata",
            field="id",
            value=sid,
        )
    response.status_code = 200
    response.headers["ETag"] = f'"{info.last_seq}"'
    return session_out(info)


@router.get("", response_model=SessionPage)
async def list_sessions(
    key: Key,
    svc: Svc,
    user_id: Annotated[str | None, Query(max_length=256)] = None,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> SessionPage:
    """The tenant's sessions (one user's with ``user_id``), newest created first."""
    infos, nxt = await svc.db.sessions(
        user_id=user_id, tenant=key.tenant, cursor=cursor, limit=limit
    )
    live = [i for i in infos if not expired(i)]  # past their own TTL: deleted on access
    return SessionPage(sessions=[session_out(i) for i in live], next_cursor=nxt)


@router.get("/{session_id}", response_model=SessionOut)
async def get_session(session_id: str, key: Key, svc: Svc, response: Response) -> SessionOut:
    info = await session_info(svc, key, session_id)
    response.headers["ETag"] = f'"{info.last_seq}"'
    return session_out(info)


@router.delete("/{session_id}", status_code=204)
async def delete_session(session_id: str, key: Key, svc: Svc) -> Response:
    """Delete a session with its log, derived state and recall items."""
    info = await session_info(svc, key, session_id)  # an expired session is already gone
    if not await remove_session(svc, key, info):
        raise not_found("session", session_id)
    return Response(status_code=204)
