"""``/v1/sessions``: create, list (cursor pages), read and delete sessions of the key's
tenant. A session of another tenant, even under the same id, is answered exactly as one
that does not exist. The work is ``operations``'s (the MCP tools call the same)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Response

from . import operations
from .deps import ApiKey, Services, get_services, require_key, session_info
from .models import SessionCreate, SessionOut, SessionPage
from .operations import session_out

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])

Key = Annotated[ApiKey, Depends(require_key)]
Svc = Annotated[Services, Depends(get_services)]


@router.post("", status_code=201, response_model=SessionOut)
async def create_session(body: SessionCreate, key: Key, svc: Svc, response: Response) -> SessionOut:
    """Create a session owned by ``user_id``. Creating it again with the same owner and
    metadata returns it (200); another owner or other metadata is a 409."""
    info, created = await operations.create_session(
        svc,
        key,
        session_id=body.id,
        user_id=body.user_id,
        metadata=body.metadata,
        ttl_seconds=body.ttl_seconds,
    )
    if created:
        response.headers["Location"] = f"/v1/sessions/{quote(info.session_id, safe='')}"
    else:
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
    sessions, nxt = await operations.list_sessions(
        svc, key, user_id=user_id, cursor=cursor, limit=limit
    )
    return SessionPage(sessions=sessions, next_cursor=nxt)


@router.get("/{session_id}", response_model=SessionOut)
async def get_session(session_id: str, key: Key, svc: Svc, response: Response) -> SessionOut:
    info = await session_info(svc, key, session_id)
    response.headers["ETag"] = f'"{info.last_seq}"'
    return session_out(info)


@router.delete("/{session_id}", status_code=204)
async def delete_session(session_id: str, key: Key, svc: Svc) -> Response:
    """Delete a session with its log, derived state and recall items."""
    await operations.delete_session(svc, key, session_id)
    return Response(status_code=204)
