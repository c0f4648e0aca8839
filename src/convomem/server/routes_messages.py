"""``/v1/sessions/{id}/messages`` and ``/context``: append to a session's log, page
through it, and assemble its context under budget with the accounting of every message.

Appends go through the session's ``ConversationMemory`` (resumed from the store's
derived state), so the view, the summary and the state are kept current as messages
arrive, and a request costs the same however long the session is.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Query, Response

from ..errors import ConcurrentUpdate, ConfigError, InvalidMessage, MessageConflict
from ..model import Message
from ..stores.database import SessionInfo
from . import operations
from .deps import ApiKey, Services, get_services, require_key, session_info
from .idempotency import body_digest
from .models import Appended, AppendRequest, AppendResponse, ContextResponse, MessagePage
from .problems import Problem

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["messages"])

Key = Annotated[ApiKey, Depends(require_key)]
Svc = Annotated[Services, Depends(get_services)]


def _with_idempotency(messages: list[Message], idem: str, body: AppendRequest) -> list[Message]:
    """Ids for messages sent without one, made from the ``Idempotency-Key``: a retry of
    the request appends nothing new (and the same key with another body meets different
    content under the same ids: a 422, should it pass the key's binding)."""
    digest = hashlib.sha256(idem.encode()).hexdigest()[:24]
    given = [("id" in d) for d in body.messages] if body.format != "anthropic" else None
    out = []
    for i, m in enumerate(messages):
        if given is not None and i < len(given) and given[i]:
            out.append(m)
        else:
            out.append(m.replace(id=f"idem-{digest}-{i}-{len(messages)}"))
    return out


def _if_match(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip().removeprefix("W/").strip('"')
    try:
        seq = int(text)
    except ValueError:
        raise Problem(
            422,
            "bad-request",
            'If-Match: the session\'s seq, e.g. "12"',
            field="If-Match",
            value=value,
        ) from None
    if seq < 0:
        raise Problem(422, "bad-request", "If-Match: a seq >= 0", field="If-Match", value=value)
    return seq


@router.post("/messages", status_code=201, response_model=AppendResponse)
async def append_messages(
    session_id: str,
    body: AppendRequest,
    key: Key,
    svc: Svc,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
    if_match: Annotated[str | None, Header(max_length=64)] = None,
) -> AppendResponse:
    """Append messages, all or nothing (all checked before anything is written).
    Idempotent by message id and by ``Idempotency-Key``; ``If-Match: <seq>`` answers
    409 when the session moved past it. The new newest seq is returned in the
    ``ETag``."""
    operations.check_sizes(svc, body.messages)
    expected = _if_match(if_match)
    messages = operations.convert(body.messages, body.format, body.system)
    info = await session_info(svc, key, session_id)
    idem = svc.idempotency if idempotency_key is not None else None
    digest = ""
    bound = False  # whether this request bound the key (and may unbind it)
    if idem is not None and idempotency_key is not None:
        messages = _with_idempotency(messages, idempotency_key, body)
        digest = body_digest(session_id, body.model_dump(mode="json"))
        earlier = await idem.claim(key.tenant, info, idempotency_key, digest)
        if earlier is not None and earlier.digest != digest:
            raise _reused(idempotency_key)
        if earlier is not None and earlier.answer is not None:
            response.headers["ETag"] = f'"{earlier.answer["last_seq"]}"'
            response.headers["Idempotent-Replayed"] = "true"
            return AppendResponse.model_validate(earlier.answer)
        bound = earlier is None
    try:
        answer = await _append(svc, key, info, messages, expected, if_match)
    except (Problem, ConcurrentUpdate, MessageConflict, InvalidMessage, ConfigError) as exc:
        # Refused before anything was written: the key is free for a corrected request.
        if bound and idem is not None and idempotency_key is not None:
            await idem.release(key.tenant, info, idempotency_key)
        if (
            isinstance(exc, MessageConflict)
            and idempotency_key is not None
            and exc.message_id.startswith("idem-")
        ):
            raise _reused(idempotency_key) from None
        raise
    if idem is not None and idempotency_key is not None:
        await idem.complete(
            key.tenant, info, idempotency_key, digest, answer.model_dump(mode="json")
        )
    response.headers["ETag"] = f'"{answer.last_seq}"'
    return answer


async def _append(
    svc: Services,
    key: ApiKey,
    info: SessionInfo,
    messages: list[Message],
    expected: int | None,
    if_match: str | None,
) -> AppendResponse:
    """``operations.append``: one store append, all or nothing; ``expected``, the
    ``If-Match`` seq, is checked inside its compare-and-set (of writers racing with one
    ``If-Match`` exactly one wins)."""
    try:
        added, last = await operations.append(svc, key, info, messages, expected_seq=expected)
    except ConcurrentUpdate as exc:
        if expected is None:
            raise  # races lost past the memory's own retries: a 409 conflict
        raise _moved(exc.actual, expected, if_match) from None
    return AppendResponse(
        session_id=info.session_id,
        last_seq=last,
        messages=[Appended(id=m.id, role=m.role) for m in added],
    )


def _moved(actual: int, expected: int, if_match: str | None) -> Problem:
    return Problem(
        409,
        "precondition-failed",
        f"the session is at seq {actual}, not {expected}",
        field="If-Match",
        value=if_match,
        headers={"ETag": f'"{actual}"'},
    )


def _reused(idempotency_key: str) -> Problem:
    return Problem(
        422,
        "idempotency-conflict",
        "this Idempotency-Key was used with another request body",
        field="Idempotency-Key",
        value=idempotency_key,
    )


@router.get("/messages", response_model=MessagePage)
async def list_messages(
    session_id: str,
    key: Key,
    svc: Svc,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> MessagePage:
    """A page of the log, oldest first; ``next_cursor`` continues it (None: the end)."""
    messages, nxt = await operations.messages_page(svc, key, session_id, cursor=cursor, limit=limit)
    return MessagePage(messages=messages, next_cursor=nxt)


@router.get("/context", response_model=ContextResponse)
async def get_context(
    session_id: str,
    key: Key,
    svc: Svc,
    response: Response,
    format: Literal["openai", "anthropic"] = "openai",
    budget: Annotated[int | None, Query(ge=1)] = None,
    query: Annotated[str | None, Query(max_length=4000)] = None,
) -> ContextResponse:
    """The context to send now and where every message of the log is (see
    ``summary.accounting``)."""
    answer, last = await operations.context(
        svc, key, session_id, format=format, budget=budget, query=query
    )
    response.headers["ETag"] = f'"{last}"'
    return answer
