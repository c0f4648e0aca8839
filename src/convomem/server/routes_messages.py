"""``/v1/sessions/{id}/messages`` and ``/context``: append to a session's log, page
through it, and assemble its context under budget with the accounting of every message.

Appends go through the session's ``ConversationMemory`` (resumed from the store's
derived state), so the view, the summary and the state are kept current as messages
arrive, and a request costs the same however long the session is.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Response

from ..errors import MessageConflict
from ..formats import from_anthropic, from_openai, to_anthropic, to_openai
from ..model import Message
from ..packing import Packer
from .deps import (
    ApiKey,
    Services,
    get_services,
    index_appended,
    require_key,
    session_info,
    settle,
    use_memory,
)
from .idempotency import body_digest
from .models import Appended, AppendRequest, AppendResponse, ContextResponse, MessagePage
from .problems import Problem
from .summary import accounting

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["messages"])

Key = Annotated[ApiKey, Depends(require_key)]
Svc = Annotated[Services, Depends(get_services)]


def _convert(body: AppendRequest) -> list[Message]:
    if body.format == "anthropic":
        return from_anthropic(body.messages, system=body.system)
    if body.system is not None:
        raise Problem(
            422,
            "bad-request",
            "system: only with format=anthropic",
            field="system",
            value=body.system,
        )
    if body.format == "convomem":
        out = []
        for i, d in enumerate(body.messages):
            try:
                out.append(Message.from_dict(d))
            except Exception as exc:  # InvalidMessage names the field; add the position
                raise Problem(
                    422,
                    "invalid-message",
                    f"messages[{i}]: {exc}",
                    field=f"messages[{i}]",
                    value=d,
                ) from None
        return out
    return from_openai(body.messages)


def _check_sizes(svc: Services, body: AppendRequest) -> None:
    s = svc.settings
    if len(body.messages) > s.max_messages:
        raise Problem(
            413,
            "too-large",
            f"at most {s.max_messages} messages per request",
            field="messages",
            value=len(body.messages),
        )
    for i, d in enumerate(body.messages):
        size = len(json.dumps(d, ensure_ascii=False))
        if size > s.max_message_chars:
            raise Problem(
                413,
                "too-large",
                f"messages[{i}]: {size} characters; at most {s.max_message_chars}",
                field=f"messages[{i}]",
                value=size,
            )


def _with_idempotency(messages: list[Message], idem: str, body: AppendRequest) -> list[Message]:
    """Ids for messages sent without one, made from the ``Idempotency-Key`` and the
    request's digest: a retry of the request appends nothing new, and the same key with
    another body meets different content under the same ids (a 409)."""
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
    """Append messages (all checked before anything is written). Idempotent by message
    id and by ``Idempotency-Key``; ``If-Match: <seq>`` answers 409 when the session
    moved past it. The new newest seq is returned in the ``ETag``."""
    _check_sizes(svc, body)
    expected = _if_match(if_match)
    messages = _convert(body)
    info = await session_info(svc, key, session_id)
    digest = ""
    if idempotency_key is not None and svc.idempotency is not None:
        messages = _with_idempotency(messages, idempotency_key, body)
        digest = body_digest(session_id, body.model_dump(mode="json"))
        earlier = await svc.idempotency.recall(key.tenant, session_id, idempotency_key)
        if earlier is not None:
            if earlier[0] != digest:
                raise _reused(idempotency_key)
            response.headers["ETag"] = f'"{earlier[1]["last_seq"]}"'
            response.headers["Idempotent-Replayed"] = "true"
            return AppendResponse.model_validate(earlier[1])
    if expected is not None and info.last_seq != expected:
        raise Problem(
            409,
            "precondition-failed",
            f"the session is at seq {info.last_seq}, not {expected}",
            field="If-Match",
            value=if_match,
            headers={"ETag": f'"{info.last_seq}"'},
        )
    added: list[Message] = []
    async with use_memory(svc, key, info) as memory:
        before = memory.stats()
        try:
            for m in messages:
                added.append(await memory.aadd_message(m))
            await settle(svc, memory)  # what left the view indexed, the user's facts saved
        except MessageConflict as exc:
            if idempotency_key is not None and exc.message_id.startswith("idem-"):
                raise _reused(idempotency_key) from None
            raise
        finally:
            st = memory.stats()
            svc.metrics.add("compactions", st.compactions - before.compactions)
            svc.metrics.add("summarizer_calls", st.summarizer_calls - before.summarizer_calls)
        last: int = memory._last  # the newest seq this memory wrote or saw
    await index_appended(svc, key, info, added)  # a recall failure fails nothing
    answer = AppendResponse(
        session_id=session_id,
        last_seq=last,
        messages=[Appended(id=m.id, role=m.role) for m in added],
    )
    if idempotency_key is not None and svc.idempotency is not None:
        await svc.idempotency.remember(
            key.tenant, session_id, idempotency_key, digest, answer.model_dump(mode="json")
        )
    response.headers["ETag"] = f'"{last}"'
    return answer


def _reused(idempotency_key: str) -> Problem:
    return Problem(
        409,
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
    await session_info(svc, key, session_id)
    store = svc.db.session(session_id, tenant=key.tenant)
    entries, nxt = await store.entries(cursor, min(limit, svc.settings.max_page))
    return MessagePage(
        messages=[{"seq": e.seq, **e.message.to_dict()} for e in entries], next_cursor=nxt
    )


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
    info = await session_info(svc, key, session_id)
    async with use_memory(svc, key, info) as memory:
        before = memory.stats()
        kept = await memory.acontext("messages", query=query)
        context: Any
        dropped = 0
        if budget is not None and budget < memory.budget:
            packed = Packer(
                budget=budget,
                tokenizer=memory.tokenizer,
                start_on="user" if format == "anthropic" else None,
            ).pack(kept)
            dropped = len(kept) - len(packed.kept)
            kept = list(packed.kept)
            context = _render(kept, format)
        else:
            context = await memory.acontext(format, query=query)
        st = memory.stats()
        svc.metrics.add("compactions", st.compactions - before.compactions)
        svc.metrics.add("summarizer_calls", st.summarizer_calls - before.summarizer_calls)
        shown = sum(1 for h in (st.recall or {}).get("hits", ()) if h["shown"])
        svc.metrics.add("recall_hits", shown)
        response.headers["ETag"] = f'"{memory._last}"'
        return ContextResponse(
            format=format,
            context=context,
            accounting=accounting(memory, kept, budget=budget, query=query, dropped=dropped),
        )


def _render(messages: list[Message], format: str) -> Any:
    if format == "openai":
        return to_openai(messages)
    system, out = to_anthropic(messages)
    return {"messages": out} if system is None else {"system": system, "messages": out}
